"""The search core that ``sweep`` and ``tune`` stand on.

- :mod:`~model_optimizer.search.core.session`: one search run in its archive (create, resume,
  ``state.json``, the elapsed clock and time budget, measuring under ``steps/``, sealing
  with interrupts held off);
- :mod:`~model_optimizer.search.core.knobs`: engine knobs as searches handle them (float knobs,
  rounding, the typed recipe values a setting gives);
- :mod:`~model_optimizer.search.core.revision`: the chosen configuration written as a validated
  recipe revision.

A strategy module keeps only its strategy: what to measure next and what to choose.
Only the pure knob helpers are re-exported here, so that a pure strategy module importing
them does not pull in the runner.
"""

from model_optimizer.search.core.knobs import (
    FLOAT_DECIMALS,
    FLOAT_KNOBS,
    describe,
    engine_values,
    is_float_knob,
)

__all__ = [
    "FLOAT_DECIMALS",
    "FLOAT_KNOBS",
    "describe",
    "engine_values",
    "is_float_knob",
]
