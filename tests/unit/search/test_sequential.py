"""The sequential rule (search/sequential.py) on recorded real series.

- issue 35's second run: 44 and 48 re-measured interleaved on one server, 66.3, 66.7, 67.6
  against 69.0, 69.2, 67.1 req/s;
- docs/benchmarks/quiet-test-bed.md run 2: twelve 10 s windows of one server at 16 in flight
  (CV 20%) and at 64 (CV 31%, two windows collapsed to 25.6);
- docs/benchmarks/sweep-vs-grid.md run 6: a probe-scan server whose 32 read 74.8 early and
  13.2, 15.0 late (a drifting server).

Two configurations whose true difference is 0%, 3% and 10% are made from the 16-in-flight
series: its windows in time order, alternately A and B (one configuration, so the true ratio
is 1), with A scaled by the difference.
"""

from __future__ import annotations

import math

import pytest

from model_optimizer.search.sequential import (
    CONFIDENCE,
    MIN_PAIRS,
    Difference,
    drift_of,
    log_ratios,
    projection,
    unpaired,
    window_sd,
    wrong_below,
)

ISSUE_44 = [66.3, 66.7, 67.6]
ISSUE_48 = [69.0, 69.2, 67.1]
BED_16 = [33.6, 23.8, 20.7, 24.1, 34.6, 18.4, 23.3, 23.9, 24.1, 21.8, 19.5, 24.8]
BED_64 = [80.0, 80.1, 68.4, 67.5, 25.6, 68.6, 54.1, 25.6, 75.2, 70.6, 85.9, 62.3]
RUN_6 = [(1, 11.50), (2, 13.62), (4, 11.90), (8, 16.40), (16, 11.73), (32, 74.80), (48, 63.44),
         (24, 15.97), (28, 35.87), (28, 27.93), (32, 13.20), (28, 28.98), (32, 14.99)]


def alternate(series, scale=1.0):
    """The series' windows as pairs (A, B) in time order, A scaled."""
    return [(a * scale, b) for a, b in zip(series[0::2], series[1::2], strict=True)]


def test_the_issues_44_against_48_is_answered_by_three_pairs():
    pairs = list(zip(ISSUE_44, ISSUE_48, strict=True))
    assert Difference.of(pairs[:2]) is None              # no variance from two pairs
    difference = Difference.of(pairs)
    assert difference.ratio == pytest.approx(0.977, abs=0.001)
    assert difference.low == pytest.approx(0.915, abs=0.001)
    assert difference.answer(wrong_below(0.05)) == "above"    # 44 holds at 0.90 of 48
    assert difference.answer(0.95) == "open"                  # within 5%: not yet shown
    assert difference.pairs_needed(0.95) == 17
    assert difference.pairs_needed(difference.ratio) is None  # on the bound: never


@pytest.mark.parametrize("difference,needed", [(1.0, 16), (1 / 1.03, 21), (1 / 1.10, 50)])
def test_true_differences_of_0_3_and_10_percent_at_20_percent_noise(difference, needed):
    pairs = alternate(BED_16, difference)
    interval = Difference.of(pairs)
    assert interval.low < difference < interval.high          # the truth is inside
    bound = wrong_below(0.05)
    for taken in range(MIN_PAIRS, len(pairs) + 1):            # looked at after every pair:
        assert Difference.of(pairs[:taken]).answer(bound) == "open"   # never a wrong answer
    # what would answer it: more pairs the nearer the truth lies to the bound
    assert interval.pairs_needed(bound) == needed


def test_a_difference_on_the_bound_is_never_shown_above_it():
    pairs = alternate(BED_16, 0.90)
    for taken in range(MIN_PAIRS, len(pairs) + 1):
        assert Difference.of(pairs[:taken]).answer(0.90) != "above"


def test_a_collapse_widens_the_interval_it_does_not_decide():
    """The per-window CV of this series is 31%, the old rule's "not resolved" for good; the
    interval of the difference is merely wide, and the projection says how many pairs."""
    interval = Difference.of(alternate(BED_64))
    assert interval.answer(0.90) == "open" and interval.low < 0.6 and interval.high > 1.8
    assert interval.pairs_needed(0.90) == 125
    assert projection(125 - interval.pairs, 2, 0.5) == {"windows": 238, "minutes": 119.0}
    quiet = Difference.of(alternate(BED_64[:4] + BED_64[8:]))  # without the two collapses
    assert quiet.high - quiet.low < interval.high - interval.low


def test_the_intervals_are_one_sided_at_the_stated_confidence():
    pairs = alternate(BED_16)
    interval, logs = Difference.of(pairs), log_ratios(pairs)
    mean = sum(logs) / len(logs)
    sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
    from scipy.stats import t
    half = t.ppf(CONFIDENCE, len(logs) - 1) * sd / math.sqrt(len(logs))
    assert interval.low == pytest.approx(math.exp(mean - half))
    assert interval.high == pytest.approx(math.exp(mean + half))
    assert interval.to_dict()["pairs"] == 6


def test_unpaired_readings_use_the_noise_the_pairs_measured():
    sd, dof = window_sd([log_ratios(alternate(BED_16))])
    assert dof == 5 and sd == pytest.approx(0.232, abs=0.001)   # 0.33 per pair / sqrt(2)
    apart = unpaired([66.3, 66.7, 67.6], [69.0], sd, dof)
    paired = Difference.of(list(zip(ISSUE_44, ISSUE_48, strict=True)))
    assert apart.ratio == pytest.approx(0.9685, abs=0.001)
    assert apart.high - apart.low > paired.high - paired.low     # one reading apart: wider
    assert window_sd([[0.1, 0.2]]) is None                     # one degree of freedom
    assert unpaired([], [1.0], sd, dof) is None


def test_a_drifting_server_is_detected_and_a_steady_one_is_not():
    """Run 6: 32 and 28 read early and again late on one server, each window 30 s."""
    drift = drift_of((value, index * 0.5, qps) for index, (value, qps) in enumerate(RUN_6))
    assert drift.detected and drift.high < 0 and drift.configurations == 2
    assert drift.windows == 6 and "detected: -" in drift.sentence()
    steady = drift_of((value, index * 0.5, qps) for index, (value, qps) in enumerate(
        [(44, 66.3), (48, 69.0), (44, 66.7), (48, 69.2), (44, 67.6), (48, 67.1)]))
    assert not steady.detected and steady.low < 0 < steady.high
    assert drift_of([(1, 0.0, 5.0), (2, 1.0, 6.0)]) is None   # nothing read twice
