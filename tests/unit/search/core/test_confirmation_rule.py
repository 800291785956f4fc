"""The confirmation's one shortfall rule (``search.scanrules.fell_short``): the tune's
confirming launch uses it, and the sweep's sustained run reads the same verdict from the same
figures (``search/sweep/decide.shortfall``, which is to call it)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from model_optimizer.search.core.scanrules import Reading, fell_short
from model_optimizer.search.sweep.decide import shortfall
from model_optimizer.search.sweep.model import Point
from model_optimizer.search.tune.confirm import _shortfall

#: (confirmed value, its half-width, searched value, its half-width) -> fell short
CASES = [
    ((8.0, 0.5, 10.0, 0.5), True),     # wholly below
    ((9.6, 0.5, 10.0, 0.5), False),    # the intervals overlap: no evidence
    ((12.0, 0.5, 10.0, 0.5), False),   # above
    ((8.0, None, 10.0, 0.5), False),   # the confirmation has no interval
    ((8.0, 0.5, 10.0, None), False),   # the search's figure has none
]


@pytest.mark.parametrize(("figures", "short"), CASES)
def test_fell_short(figures, short):
    confirmed, confirmed_half, searched, searched_half = figures
    assert fell_short(Reading(confirmed, confirmed_half), Reading(searched, searched_half)) \
        is short


def test_no_reading_is_no_evidence():
    assert not fell_short(None, Reading(10.0, 0.5))
    assert not fell_short(Reading(1.0, 0.1), None)


@pytest.mark.parametrize(("figures", "short"), CASES)
def test_the_tune_and_the_sweep_read_the_same_verdict(figures, short):
    confirmed, confirmed_half, searched, searched_half = figures
    run = {"qps": confirmed, "qps_half_width": confirmed_half}
    trial = SimpleNamespace(number=3, values=[searched],
                            user_attrs={"half_width": searched_half})
    assert bool(_shortfall(trial, {"figures": run}, "qps")) is short
    point = Point(16, "grow", "ok", [searched], half_width=searched_half)
    assert bool(shortfall(point, run, "qps")) is short
