"""Engine knobs as the search commands handle them: which take fractions, how values are
rounded, and the recipe keys a search's knob values set. Pure; shared by sweep and tune.
"""

from __future__ import annotations

from typing import Any

from model_optimizer.recipe.rules import FLOAT_KNOBS

#: float knob values are rounded to this many decimals (0.1 + 0.2 must equal 0.3)
FLOAT_DECIMALS = 6


def is_float_knob(name: str) -> bool:
    """True when the engine knob ``name`` takes fractional values."""
    return name in FLOAT_KNOBS


def engine_values(params: dict[str, Any]) -> dict[str, Any]:
    """The engine knobs in ``params`` as the typed recipe values they set, for
    ``LoadedRecipe.varied``: ``{"max_num_seqs": 64}`` -> ``{"engine.max_num_seqs": 64}``."""
    return {f"engine.{name}": value for name, value in params.items()}


def describe(params: dict[str, Any]) -> str:
    """A knob setting in words, the source recorded with its values: ``max_num_seqs 64``."""
    return ", ".join(f"{name} {value:g}" if isinstance(value, float) else f"{name} {value}"
                     for name, value in params.items())
