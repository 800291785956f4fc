"""The confident miss of the honest judge's run 3 (docs/benchmarks/sweep-vs-grid.md): the
default sweep grew 1 -> 2, read 8.08 +- 0.50 then 6.77 +- 0.71 req/s (one 10 s window each,
intervals disjoint), stopped on that "regression", re-measured nothing, chose 1 as resolved,
and its sustained run at 1 read 6.19 +- 0.54. Each fix turns it into "not resolved"."""

from __future__ import annotations

from model_optimizer.search.simulate.bench import Bench, Confirmed, Noise
from model_optimizer.search.simulate.drive import choose_and_confirm, sweep_config
from model_optimizer.search.simulate.truth import curves
from model_optimizer.search.sweep.decide import (
    PHASE_REMEASURE,
    choice_resolved,
    noise_note,
    remeasure_plan,
    shortfall,
    top_candidates,
)
from model_optimizer.search.sweep.strategy import Point, SweepConfig, next_value

CONFIG = SweepConfig("max_num_seqs", 1, max=64, plateau_threshold=0.05)
RUN3 = [Point(1, "grow", "ok", [8.08], slo_met=True, half_width=0.50),
        Point(2, "grow", "ok", [6.77], slo_met=True, half_width=0.71)]
CONFIRMED_AT_1 = {"qps": 6.19, "qps_half_width": 0.54}


def test_the_regression_at_the_second_value_ends_the_growth():
    assert next_value(CONFIG, RUN3).value is None       # the search it ran, unchanged


def test_a_best_at_the_smallest_value_is_remeasured_against_the_step_that_fell():
    assert top_candidates(0.05, RUN3) == [1, 2]          # before: nothing to re-measure
    assert remeasure_plan(0.05, RUN3, 2) == [1, 2, 1, 2]
    later = RUN3 + [Point(v, PHASE_REMEASURE, "ok", [q], slo_met=True, half_width=0.6)
                    for v, q in ((1, 6.3), (2, 7.4), (1, 6.9), (2, 6.1))]
    assert not choice_resolved(CONFIG, later, None, None)   # its noise now shows


def test_a_sustained_run_wholly_below_the_search_leaves_the_choice_not_resolved():
    chosen = RUN3[0]
    text = shortfall(chosen, CONFIRMED_AT_1, "qps")
    assert "6.19" in text and "7.58..8.58" in text          # 8.08 +- 0.50
    assert not choice_resolved(CONFIG, RUN3, None, None, [{"ok": True, "shortfall": text}])
    held = {"ok": True, "value": 1, "figures": {"qps": 8.0, "qps_half_width": 0.5},
            "shortfall": ""}
    # a sustained run that held up removes this objection; the choice, never re-measured,
    # still lacks a shown margin (test_margin.py), and says that instead
    assert not choice_resolved(CONFIG, RUN3, None, None, [held])
    assert "do not show the choice" in noise_note(CONFIG, RUN3, [held])
    assert shortfall(chosen, {"qps": 7.9, "qps_half_width": 0.5}, "qps") == ""  # overlaps
    assert shortfall(chosen, {"qps": 6.19}, "qps") == ""     # no interval: no evidence
    assert shortfall(chosen, CONFIRMED_AT_1, "goodput_qps") == ""
    fitted = Point(3, "fit", "ok", [8.5], slo_met=True)      # a fitted knee, no window
    assert shortfall(fitted, CONFIRMED_AT_1, "qps") == ""


class LowConfirmations(Bench):
    """A bench whose sustained runs read a third of the truth, with a tight interval."""

    def confirm(self, value, seconds):
        self.launches += 1
        return Confirmed(True, {"qps": self.curve.throughput(value) / 3,
                                "qps_half_width": 0.01})


def test_the_simulator_runs_the_same_check_on_its_confirmation():
    curve = curves()["monotone"]
    config = sweep_config(curve)
    history = [Point(v, "grow", "ok", [curve.throughput(v)], slo_met=True, half_width=0.1)
               for v in (8, 16, 32, 64)]
    bench = LowConfirmations(curve, Noise("quiet", 0.0), 0)
    chosen, validated, confirmations = choose_and_confirm(config, history, bench)
    assert validated and confirmations[0]["shortfall"]
    assert not choice_resolved(config, history, None, None, confirmations)
