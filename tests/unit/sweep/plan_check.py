"""A check shared by the sweep tests: the settling windows followed the settling's plan."""

from __future__ import annotations

from collections.abc import Sequence

from model_optimizer.sweep.decide import PHASE_REMEASURE
from model_optimizer.sweep.model import Point, SweepConfig
from model_optimizer.sweep.settle import settled_of


def assert_followed_settle_plan(history: Sequence[Point], config: SweepConfig,
                                knee: dict | None = None) -> list:
    """Every settling window is the one the plan named at its turn, rounds alternate their
    order (A B, then B A), and the first round puts two different values side by side;
    returns the settled values in order."""
    settled_values = []
    for index, point in enumerate(history):
        if point.phase == PHASE_REMEASURE:
            plan = settled_of(config, history[:index], knee, 0.1).plan
            assert plan[:1] == [point.value]
            settled_values.append(point.value)
    if settled_values:
        assert len(set(settled_values[:2])) == 2                    # A B ...
    if len(settled_values) >= 4:
        assert settled_values[2:4] == settled_values[:2][::-1]       # ... B A
    return settled_values
