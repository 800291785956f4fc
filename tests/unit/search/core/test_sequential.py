"""The sequential paired comparison on recorded real series and on series with a known truth.

Recorded here (docs/benchmarks/sweep-vs-grid.md and issue 35): the card's sweep on the
default CPU recipe re-measured 44 against 48 interleaved (66.3, 66.7, 67.6 against 69.0,
69.2, 67.1 req/s); another run re-measured 64 three times (80.7, 78.0, 54.1: the server
slowed by a third over its life); the quiet bed's run 6 saw 32 collapse from 74.8 to 13.2
beside 28's 27.9."""

from __future__ import annotations

import math
import random

import pytest

from model_optimizer.search.core.sequential import Paired, adjacent_pairs, t95
from model_optimizer.search.sweep.decide import PHASE_REMEASURE, remeasure_plan
from model_optimizer.search.sweep.margin import margin_of
from model_optimizer.search.sweep.strategy import Point

CARD_44 = [66.3, 66.7, 67.6]
CARD_48 = [69.0, 69.2, 67.1]


def test_the_cards_pairs_show_44_at_90_percent_of_48_but_not_at_par():
    pairs = Paired.of(list(zip(CARD_44, CARD_48, strict=True)))
    assert pairs.n == 3 and pairs.ratio == pytest.approx(0.977, abs=0.002)
    logs = [math.log(a / b) for a, b in zip(CARD_44, CARD_48, strict=True)]
    half = t95(2) * pairs.sd / math.sqrt(3)
    assert pairs.bound() == pytest.approx(math.exp(sum(logs) / 3 - half))
    assert pairs.shows(0.90) and not pairs.shows(1.0)


def test_a_drifting_server_cancels_in_the_pairs_not_in_the_windows():
    # the server slowed by a third over its life; the neighbour read 3% lower beside it
    drifting = [80.7, 78.0, 54.1]
    neighbour = [0.97 * x * (1 + e) for x, e in zip(drifting, (0.01, -0.01, 0.005),
                                                    strict=True)]
    pairs = Paired.of(list(zip(neighbour, drifting, strict=True)))
    window_cv = (max(drifting) - min(drifting)) / (sum(drifting) / 3)
    assert window_cv > 0.3                    # one window says nothing at 5%
    assert pairs.sd < 0.02 and pairs.shows(0.90)


def test_a_collapse_widens_the_interval_instead_of_deciding():
    # run 6: 28 against 32, whose second window collapsed
    pairs = Paired.of([(35.87, 74.80), (27.93, 13.20), (28.98, 14.99)])
    assert pairs.sd > 0.5
    assert not pairs.shows(0.90)
    assert pairs.pairs_to_show(0.90) is not None and pairs.pairs_to_show(0.90) > 3
    low = Paired.of([(60.0, 100.0), (62.0, 101.0), (59.0, 98.0)])
    assert low.pairs_to_show(0.90) is None   # its mean is below 90%: more pairs won't help


@pytest.mark.parametrize(("truth", "expect_shown"), [(1.00, True), (0.97, True), (0.90, False)])
def test_known_differences_at_5_percent_noise(truth, expect_shown):
    """Two configurations whose true ratio is 1.00, 0.97 and 0.90 (the margin itself), each
    window with 5% lognormal noise and a drift shared by the pair: at 0% and 3% the margin
    shows in at least 90% of series of 12 pairs (the power at 3%: sqrt(12) * ln(0.97/0.90)
    / (0.05 * sqrt(2)) = 3.7 standard errors against the 1.8 + 1.3 that 90% needs); at 10%
    it shows in at most the 5% the one-sided bound allows (binomial slack for 400: 8%)."""
    rng, shown = random.Random(35), 0
    for _ in range(400):
        pairs = []
        for step in range(12):
            drift = 1 - 0.02 * step
            pairs.append((truth * drift * rng.lognormvariate(0, 0.05),
                          drift * rng.lognormvariate(0, 0.05)))
        shown += Paired.of(pairs).shows(0.90)
    share = shown / 400
    assert share >= 0.90 if expect_shown else share <= 0.08


def test_adjacent_pairs_use_each_window_once_and_skip_the_named_one():
    series = [("a", 1.0), ("b", 2.0), ("a", 3.0), ("b", 4.0), ("c", 5.0), ("a", 6.0),
              ("b", 7.0)]
    assert adjacent_pairs(series, "a", "b") == [(1.0, 2.0), (3.0, 4.0), (6.0, 7.0)]
    assert adjacent_pairs(series, "b", "a") == [(2.0, 1.0), (4.0, 3.0), (7.0, 6.0)]
    assert adjacent_pairs(series, "a", "b", frozenset({0})) == [(3.0, 2.0),
                                                                  (6.0, 7.0)]


def window(value, qps, phase="grow") -> Point:
    return Point(value, phase, "ok", [qps], slo_met=True, launches=0, half_width=1.0)


def test_the_sweep_pairs_the_knee_until_the_margin_shows_then_stops():
    """The card's 44/48 after growth to 64 and bisection, windows noisy enough (14% between
    repeats) that unpaired windows never show the margin: the plan keeps pairing 44 with its
    weakest challenger; once the pairs show it, the plan ends."""
    history = [window(8, 30.0), window(16, 52.0), window(32, 64.0), window(64, 69.5),
               window(48, 69.0, "bisect"), window(40, 61.0, "bisect"),
               window(44, 68.8, "bisect")]
    readings = iter([(66.3, 69.0), (66.7, 69.2), (57.6, 59.1), (75.1, 77.4), (66.9, 68.8),
                     (71.2, 73.0), (64.4, 66.1), (69.9, 71.5), (70.3, 72.2), (65.8, 67.3)])
    for _ in range(40):
        plan = remeasure_plan(0.05, history)
        if not plan:
            break
        pair = plan[:2] if len(plan) >= 2 else plan
        knee, other = next(readings, (67.0, 68.8))
        for value in pair:
            history.append(window(value, knee if value == 44 else other, PHASE_REMEASURE))
    assert remeasure_plan(0.05, history) == []
    margin = margin_of(0.05, history)
    assert margin.knee == 44 and margin.shortfall is None
    assert any(c.paired is not None for c in margin.comparisons)
