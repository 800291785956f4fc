"""Engine knobs as the search commands handle them: which take fractions, how values are
rounded, and how a value becomes a ``--set`` override. Pure; shared by sweep and tune.
"""

from __future__ import annotations

from typing import Any

from model_optimizer.recipe.rules import FLOAT_KNOBS

#: float knob values are rounded to this many decimals (0.1 + 0.2 must equal 0.3)
FLOAT_DECIMALS = 6


def is_float_knob(name: str) -> bool:
    """True when the engine knob ``name`` takes fractional values."""
    return name in FLOAT_KNOBS


def yaml_value(value: Any) -> str:
    """One value as ``--set`` text: booleans in YAML spelling, whole floats as integers."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def engine_overrides(params: dict[str, Any]) -> list[str]:
    """The ``--set`` overrides that give the engine knobs in ``params`` their values."""
    return [f"engine.{name}={yaml_value(value)}" for name, value in params.items()]
