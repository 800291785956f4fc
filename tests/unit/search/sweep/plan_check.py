"""A check shared by the sweep tests: the re-measurements followed ``remeasure_plan``."""

from __future__ import annotations

from collections.abc import Sequence

from model_optimizer.search.sweep.decide import PHASE_REMEASURE, remeasure_plan
from model_optimizer.search.sweep.model import Point


def assert_followed_remeasure_plan(history: Sequence[Point], threshold: float,
                                   rounds: int) -> list:
    """Every re-measured window is the one the plan named at its turn, the plan ends empty,
    and the first round interleaves two different values; returns the re-measured values."""
    remeasured = []
    for index, point in enumerate(history):
        if point.phase == PHASE_REMEASURE:
            assert remeasure_plan(threshold, history[:index], rounds)[:1] == [point.value]
            remeasured.append(point.value)
    assert remeasure_plan(threshold, history, rounds) == []
    assert len(remeasured) >= 2 * rounds and len(set(remeasured[:2])) == 2  # A B ...
    return remeasured
