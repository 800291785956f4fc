"""The sweep stage: the pure strategy that picks the next value of one engine knob.

``next_value(config, history)`` is the ``next(history) -> config | None`` of the design: the
sweep loop measures each proposed value and stops at ``Decision(value=None)``; ``choose``
then picks the knee and ``fallback_candidates`` the values to try if the sustained
confirmation run rejects it.
"""

from model_optimizer.sweep.strategy import (
    FLOAT_KNOBS,
    LOOP_KEYS,
    MEMORY_FAILURE_KINDS,
    PHASE_BISECT,
    PHASE_CATEGORICAL,
    PHASE_GROW,
    PHASES,
    STATUS_FAILED,
    STATUS_OK,
    STATUS_SKIPPED,
    STATUSES,
    STOP_RULES,
    Decision,
    Point,
    SweepConfig,
    SweepConfigError,
    choose,
    fallback_candidates,
    grow_sequence,
    growth_stop,
    next_value,
)

__all__ = [
    "FLOAT_KNOBS",
    "LOOP_KEYS",
    "MEMORY_FAILURE_KINDS",
    "PHASES",
    "PHASE_BISECT",
    "PHASE_CATEGORICAL",
    "PHASE_GROW",
    "STATUSES",
    "STATUS_FAILED",
    "STATUS_OK",
    "STATUS_SKIPPED",
    "STOP_RULES",
    "Decision",
    "Point",
    "SweepConfig",
    "SweepConfigError",
    "choose",
    "fallback_candidates",
    "grow_sequence",
    "growth_stop",
    "next_value",
]
