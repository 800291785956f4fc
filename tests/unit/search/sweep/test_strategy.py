"""Tests of the pure sweep strategy, driven through a tiny table-based simulator.

Each test replays the loop the sweep runner runs (``next_value`` until ``None``, measuring
every proposed value) against a recorded throughput curve and asserts the exact values tried.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model_optimizer.errors import UsageError
from model_optimizer.search.sweep.strategy import (
    LOOP_KEYS,
    MEMORY_FAILURE_KINDS,
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

#: qps by max_num_seqs measured on the tiny Llama (docs/design.md section 4), with a plateau
PLATEAU_TABLE = {1: 3.8, 2: 7.0, 4: 13.0, 8: 23.0, 16: 24.0, 32: 24.2, 64: 24.2}
#: the same start, but still gaining strongly past 8
GAINING_TABLE = {1: 3.8, 2: 7.0, 4: 13.0, 8: 23.0, 16: 40.0, 32: 41.0, 64: 41.0}

Measure = Callable[[float, str], Point]


def interpolate(table: dict[float, float], value: float) -> float:
    """Piecewise-linear throughput between the table's values (flat beyond its ends)."""
    xs = sorted(table)
    if value <= xs[0]:
        return table[xs[0]]
    if value >= xs[-1]:
        return table[xs[-1]]
    index = bisect.bisect(xs, value)
    low, high = xs[index - 1], xs[index]
    return table[low] + (table[high] - table[low]) * (value - low) / (high - low)


def simulator(table: dict[float, float], *, fail_from: float | None = None,
              failure_kind: str = "kv_cache_too_small", skip_from: float | None = None,
              slo_from: float | None = None, preempt_from: float | None = None,
              noise: float = 0.0, launches_per_point: int = 1) -> Measure:
    """A measure function: value -> Point, from a throughput table and thresholds.

    With ``noise`` each point has three samples: median * (1 - noise), median, median * (1 + noise).
    """

    def measure(value: float, phase: str) -> Point:
        if skip_from is not None and value >= skip_from:
            return Point(value, phase, "skipped", [], failure_kind="planner")
        if fail_from is not None and value >= fail_from:
            return Point(value, phase, "failed", [], failure_kind=failure_kind,
                         launches=launches_per_point)
        median = interpolate(table, value)
        samples = [median * (1 - noise), median, median * (1 + noise)] if noise else [median]
        slo_met = None if slo_from is None else value < slo_from
        preemptions = 3 if preempt_from is not None and value >= preempt_from else 0
        return Point(value, phase, "ok", samples, slo_met=slo_met, preemptions=preemptions,
                     launches=launches_per_point, run_ids=[f"run-{value}"])

    return measure


def run_search(config: SweepConfig, measure: Measure,
               limit: int = 200) -> tuple[list[Point], list[Decision]]:
    """The sweep loop: ask, measure, append; returns the history and every decision."""
    history: list[Point] = []
    decisions: list[Decision] = []
    for _ in range(limit):
        decision = next_value(config, history)
        decisions.append(decision)
        if decision.value is None:
            return history, decisions
        history.append(measure(decision.value, decision.phase))
    raise AssertionError(f"no termination within {limit} steps: {[p.value for p in history]}")


def tried(history: list[Point]) -> list:
    return [point.value for point in history]


def seqs_config(**overrides) -> SweepConfig:
    return SweepConfig(**{"param": "max_num_seqs", "start": 1, "max": 64, **overrides})


# --- growth, plateau and knee ---------------------------------------------------------------


def test_plateau_stops_growth_and_bisection_refines_the_knee():
    config = seqs_config()
    history, decisions = run_search(config, simulator(PLATEAU_TABLE))
    assert tried(history) == [1, 2, 4, 8, 16, 6, 7]
    assert [p.phase for p in history] == ["grow"] * 5 + ["bisect"] * 2
    final = decisions[-1]
    assert final.stop_rule == "plateau" and final.phase is None
    assert "+4.3% over 23.0 req/s at 8" in final.reason
    assert decisions[5].reason.startswith("bisect 6 between 4 (13.0 req/s, below the knee")
    chosen, reason = choose(config, history)
    assert chosen.value == 8
    assert reason == "max_num_seqs=8: 23.0 req/s, within 5% of the best 24.0 req/s at 16"


def test_growth_reasons_give_the_evidence():
    config = seqs_config()
    _, decisions = run_search(config, simulator(PLATEAU_TABLE))
    assert decisions[0].reason == "start the growth at max_num_seqs=1"
    assert decisions[2].reason == ("grow to 4: max_num_seqs=2 gave 7.0 req/s, +84.2% over "
                                   "3.8 req/s at 1 (threshold 5%)")


def test_memory_ceiling_with_still_gaining_performance_bisects_below_the_ceiling():
    config = seqs_config()
    history, decisions = run_search(config, simulator(GAINING_TABLE, fail_from=16))
    assert tried(history) == [1, 2, 4, 8, 16, 12, 14, 13]
    assert decisions[5].reason.startswith(
        "bisect 12 between 8 (acceptable, the best so far: 23.0 req/s) and 16 "
        "(ceiling: failed: kv_cache_too_small)")
    assert decisions[-1].stop_rule == "memory"
    assert choose(config, history)[0].value == 14


def test_max_num_seqs_is_bisected_to_an_eighth_of_its_value_not_to_one():
    # issue 25: 14..16 is within 1/8 of 16, so 15 is never launched (13 is: 12..14 is wider
    # than 1/8 of 14); with the relative resolution switched off the bisection goes down to
    # one sequence, as it used to
    history, _ = run_search(seqs_config(), simulator(GAINING_TABLE, fail_from=16))
    assert tried(history)[5:] == [12, 14, 13]
    exact = seqs_config(relative_resolution=0)
    history, _ = run_search(exact, simulator(GAINING_TABLE, fail_from=16))
    assert tried(history)[5:] == [12, 14, 15]


def test_no_bisection_step_at_120_against_121():
    table = {**{v: 10.0 * v for v in (1, 2, 4, 8, 16, 32, 64)}, 128: 700.0}
    config = seqs_config(max=256)
    history, _ = run_search(config, simulator(table, fail_from=129))
    values = sorted(tried(history))
    closest = min(high - low for low, high in zip(values, values[1:], strict=False)
                  if low >= 64)
    assert closest >= 8  # 1/8 of the values near 128, never a one-sequence step
    assert SweepConfig(param="block_size", start=16, max=64).gap == 0


def test_ceiling_bisection_stops_once_the_top_value_no_longer_gains():
    # 12 gains 2% over 8: higher values are not worth launching; the knee is refined instead
    config = seqs_config()
    history, decisions = run_search(config, simulator(PLATEAU_TABLE, fail_from=16))
    assert tried(history) == [1, 2, 4, 8, 16, 12, 6, 7]
    assert decisions[-1].stop_rule == "memory"
    assert choose(config, history)[0].value == 8


def test_planner_skipped_points_are_a_ceiling():
    config = seqs_config()
    history, decisions = run_search(config, simulator(GAINING_TABLE, skip_from=16))
    assert tried(history) == [1, 2, 4, 8, 16, 12, 14, 13]
    assert history[4].status == "skipped" and history[4].launches == 0
    assert "skipped by the planner" in decisions[5].reason
    assert decisions[-1].stop_rule == "memory"


@pytest.mark.parametrize("kind", ["engine_died", "invalid_config", "unknown"])
def test_other_failures_are_a_ceiling_with_stop_rule_failure(kind):
    config = seqs_config()
    history, decisions = run_search(config, simulator(GAINING_TABLE, fail_from=16,
                                                      failure_kind=kind))
    assert tried(history) == [1, 2, 4, 8, 16, 12, 14, 13]
    assert decisions[-1].stop_rule == "failure"


def test_slo_break_stops_growth_and_bisects_toward_it():
    config = seqs_config()
    history, decisions = run_search(config, simulator(GAINING_TABLE, slo_from=16))
    assert tried(history) == [1, 2, 4, 8, 16, 12, 14, 13]
    assert "SLO missed" in decisions[5].reason
    assert decisions[-1].stop_rule == "slo"
    chosen, _ = choose(config, history)
    assert chosen.value == 14 and chosen.slo_met is True


def test_preemption_stops_growth():
    config = seqs_config()
    history, decisions = run_search(config, simulator(GAINING_TABLE, preempt_from=16))
    assert tried(history) == [1, 2, 4, 8, 16, 12, 14, 13]
    assert "3 preemptions" in decisions[5].reason
    assert decisions[-1].stop_rule == "preemption"
    assert choose(config, history)[0].value == 14


def test_regression_stops_growth_and_the_knee_is_refined_below_the_peak():
    table = {1: 3.8, 2: 7.0, 4: 13.0, 8: 23.0, 16: 15.0, 32: 10.0}
    config = seqs_config()
    history, decisions = run_search(config, simulator(table))
    assert tried(history) == [1, 2, 4, 8, 16, 6, 7]
    assert decisions[-1].stop_rule == "regression"
    assert choose(config, history)[0].value == 8


def test_max_is_tried_once_then_growth_stops():
    linear = {1: 1.0, 100: 100.0}
    config = seqs_config(max=10)
    assert grow_sequence(config) == [1, 2, 4, 8, 10]
    history, decisions = run_search(config, simulator(linear))
    assert tried(history) == [1, 2, 4, 8, 10, 9]
    assert decisions[-1].stop_rule == "max"
    assert "largest value allowed (max 10)" in decisions[-1].reason
    assert choose(config, history)[0].value == 10


def test_budget_ends_growth():
    config = seqs_config(max_launches=3)
    history, decisions = run_search(config, simulator(PLATEAU_TABLE))
    assert tried(history) == [1, 2, 4]
    assert decisions[-1].stop_rule == "budget" and decisions[-1].value is None
    assert "3 of 3 launches used" in decisions[-1].reason


def test_budget_ends_bisection_and_counts_every_launch():
    config = seqs_config(max_launches=12)
    history, decisions = run_search(config, simulator(PLATEAU_TABLE, launches_per_point=2))
    assert tried(history) == [1, 2, 4, 8, 16, 6]
    assert decisions[-1].stop_rule == "budget"


def test_a_search_that_finishes_on_its_last_budgeted_launch_keeps_its_stop_rule():
    config = seqs_config(max_launches=7)
    history, decisions = run_search(config, simulator(PLATEAU_TABLE))
    assert len(history) == 7
    assert decisions[-1].stop_rule == "plateau"


def test_a_failing_start_finishes_with_nothing_chosen():
    config = seqs_config(start=4)
    history, decisions = run_search(config, simulator(PLATEAU_TABLE, fail_from=4,
                                                      failure_kind="oom"))
    assert tried(history) == [4]
    assert decisions[-1].stop_rule == "memory"
    assert "nothing to bisect" in decisions[-1].reason
    chosen, reason = choose(config, history)
    assert chosen is None
    assert reason == "no acceptable value of max_num_seqs; tried: 4 (failed: oom)"


# --- noise --------------------------------------------------------------------------------


NOISY_MEDIANS = {1: 10.0, 2: 20.0, 4: 20.4, 8: 30.0, 16: 30.3, 32: 30.5, 64: 30.5}


def test_small_gains_inside_the_noise_never_stop_growth():
    config = seqs_config()
    history, decisions = run_search(config, simulator(NOISY_MEDIANS, noise=0.1))
    # 2 -> 4 gains 2% with a 20% spread: one more step; 8 gains again; 16, 32 and 64 are
    # inside the noise too: a plateau is never shown, growth runs to max (issue 11)
    assert tried(history)[:7] == [1, 2, 4, 8, 16, 32, 64]
    assert "inside the noise" in decisions[3].reason
    assert decisions[-1].stop_rule == "max"
    assert choose(config, history)[0].value == 8


def test_without_noise_the_same_medians_stop_at_the_first_flat_step():
    config = seqs_config()
    history, decisions = run_search(config, simulator(NOISY_MEDIANS))
    assert [p.value for p in history if p.phase == "grow"] == [1, 2, 4]
    assert decisions[-1].stop_rule == "plateau"


def noisy_point(value: float, median: float, noise: float) -> Point:
    return Point(value, "grow", "ok", [median * (1 - noise), median, median * (1 + noise)],
                 launches=1)


def test_a_drop_with_disjoint_ranges_is_a_regression():
    config = seqs_config()
    history = [noisy_point(1, 20.0, 0.1), noisy_point(2, 16.0, 0.1)]  # [18, 22] vs [14.4, 17.6]
    assert growth_stop(config, history)[0] == "regression"


def test_a_drop_with_overlapping_ranges_is_noise_and_growth_goes_on():
    config = seqs_config()
    history = [noisy_point(1, 20.0, 0.15), noisy_point(2, 16.0, 0.15)]  # [17, 23] vs [13.6, 18.4]
    assert growth_stop(config, history)[0] is None
    decision = next_value(config, history)
    assert decision.value == 4 and "inside the noise" in decision.reason


def test_a_gain_inside_the_noise_is_undecided_and_a_precise_flat_step_stops():
    config = seqs_config()
    history = [noisy_point(1, 20.0, 0.2), noisy_point(2, 20.2, 0.2),  # inside the noise
               noisy_point(4, 24.0, 0.2),                             # +19%, inside the noise
               noisy_point(8, 24.1, 0.2)]
    assert growth_stop(config, history)[0] is None
    assert "inside the noise" in next_value(config, history).reason
    history.append(noisy_point(16, 48.0, 0.01))                       # gain, outside the noise
    history.append(noisy_point(32, 48.5, 0.01))                       # shown flat: +1% +- 1.4%
    assert growth_stop(config, history)[0] == "plateau"


# --- categorical --------------------------------------------------------------------------


def test_categorical_values_are_tried_in_order_and_the_best_is_chosen():
    config = SweepConfig(param="kv_cache_dtype", start=None, values=["auto", "fp8", "fp8_e5m2"])
    table = {"auto": 20.0, "fp8": 26.0, "fp8_e5m2": 26.0}

    def measure(value, phase):
        return Point(value, phase, "ok", [table[value]], launches=1)

    history, decisions = run_search(config, measure)
    assert tried(history) == ["auto", "fp8", "fp8_e5m2"]
    assert {p.phase for p in history} == {"categorical"}
    assert decisions[-1].stop_rule == "exhausted"
    chosen, reason = choose(config, history)
    assert chosen.value == "fp8"  # tie with fp8_e5m2: first in values
    assert reason == "kv_cache_dtype=fp8: 26.0 req/s, the best acceptable value measured"
    assert tried(fallback_candidates(config, history, {"fp8"})) == ["fp8_e5m2", "auto"]


def test_categorical_booleans_are_not_confused_with_numbers():
    config = SweepConfig(param="enable_prefix_caching", start=None, values=[True, False])
    history = [Point(1, "categorical", "ok", [5.0])]
    assert next_value(config, history).value is True


def test_categorical_failures_are_not_chosen():
    config = SweepConfig(param="kv_cache_dtype", start=None, values=["auto", "fp8"])
    history = [Point("auto", "categorical", "ok", [20.0]),
               Point("fp8", "categorical", "failed", [], failure_kind="invalid_config")]
    assert choose(config, history)[0].value == "auto"


# --- value grid ---------------------------------------------------------------------------


def test_integer_rounding_keeps_growth_strictly_increasing():
    config = seqs_config(growth=1.3, max=10)
    assert grow_sequence(config) == [1, 2, 3, 4, 5, 7, 9, 10]
    assert all(isinstance(value, int) for value in grow_sequence(config))


def test_additive_step():
    assert grow_sequence(seqs_config(start=8, step=8, max=40)) == [8, 16, 24, 32, 40]


def test_multiple_of_32_for_cpu_block_sizes():
    config = SweepConfig(param="block_size", start=16, max=300, multiple_of=32)
    assert grow_sequence(config) == [32, 64, 128, 256, 288]
    table = {32: 10.0, 64: 14.0, 128: 20.0, 256: 40.0}
    history, decisions = run_search(config, simulator(table, fail_from=256))
    assert tried(history) == [32, 64, 128, 256, 192, 224]
    assert all(value % 32 == 0 for value in tried(history))
    assert decisions[-1].stop_rule == "memory"


def test_float_knob_with_step_and_resolution():
    config = SweepConfig(param="gpu_memory_utilization", start=0.5, step=0.1, max=0.95,
                         resolution=0.02, integer=False)
    assert grow_sequence(config) == [0.5, 0.6, 0.7, 0.8, 0.9, 0.95]
    history, decisions = run_search(config, simulator({0.0: 0.0, 1.0: 40.0}, fail_from=0.92,
                                                      failure_kind="oom"))
    assert tried(history) == [0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.925, 0.9125, 0.85, 0.875, 0.8625]
    assert decisions[-1].stop_rule == "memory"
    chosen, reason = choose(config, history)
    assert chosen.value == 0.875
    assert reason == ("gpu_memory_utilization=0.875: 35.0 req/s, within 5% of the best "
                      "36.5 req/s at 0.9125")


def test_grow_sequence_without_max_is_limited():
    assert grow_sequence(seqs_config(max=None), limit=5) == [1, 2, 4, 8, 16]


# --- determinism and resume ---------------------------------------------------------------


def test_same_history_same_decision():
    config = seqs_config()
    history, _ = run_search(config, simulator(GAINING_TABLE, fail_from=16))
    assert next_value(config, history) == next_value(config, list(history))


def test_replaying_prefixes_and_json_round_trips_reproduce_every_decision():
    config = seqs_config(max_launches=20)
    history, decisions = run_search(config, simulator(GAINING_TABLE, fail_from=16, noise=0.02))
    stored = json.loads(json.dumps({"config": config.to_dict(),
                                    "history": [p.to_dict() for p in history],
                                    "decisions": [d.to_dict() for d in decisions]}))
    restored_config = SweepConfig.from_dict(stored["config"])
    restored = [Point.from_dict(p) for p in stored["history"]]
    assert restored_config == config and restored == history
    assert [Decision.from_dict(d) for d in stored["decisions"]] == decisions
    for index, decision in enumerate(decisions):
        assert next_value(restored_config, restored[:index]) == decision


# --- choose and fallbacks -----------------------------------------------------------------


def test_choose_picks_the_knee_not_the_maximum():
    config = seqs_config()
    history = [Point(v, "grow", "ok", [qps]) for v, qps in [(4, 13.0), (8, 23.1), (16, 23.9)]]
    chosen, reason = choose(config, history)
    assert chosen.value == 8
    assert reason == "max_num_seqs=8: 23.1 req/s, within 5% of the best 23.9 req/s at 16"


def test_choose_ignores_unacceptable_points_even_when_faster():
    config = seqs_config()
    history = [Point(8, "grow", "ok", [20.0]),
               Point(16, "grow", "ok", [30.0], slo_met=False),
               Point(32, "grow", "ok", [31.0], preemptions=2)]
    chosen, reason = choose(config, history)
    assert chosen.value == 8 and "the best acceptable value" in reason


def test_fallback_candidates_go_down_from_the_rejected_value():
    config = seqs_config()
    history, _ = run_search(config, simulator(PLATEAU_TABLE))
    assert tried(fallback_candidates(config, history, set())) == [8, 7, 6, 4, 2, 1]
    assert tried(fallback_candidates(config, history, {8})) == [7, 6, 4, 2, 1]
    assert tried(fallback_candidates(config, history, {8, 7})) == [6, 4, 2, 1]


def test_fallback_candidates_skip_unacceptable_points():
    config = seqs_config()
    history = [Point(2, "grow", "ok", [10.0]), Point(4, "bisect", "ok", [12.0], slo_met=False),
               Point(6, "bisect", "ok", [19.5]), Point(8, "grow", "ok", [20.0])]
    assert tried(fallback_candidates(config, history, {6})) == [2]


# --- config -------------------------------------------------------------------------------


def test_config_errors_are_usage_errors_listing_every_problem():
    with pytest.raises(SweepConfigError) as caught:
        SweepConfig(param="max_num_seqs", start=None, growth=1.0)
    assert isinstance(caught.value, UsageError) and isinstance(caught.value, ValueError)
    assert "start > 0" in str(caught.value) and "growth must be > 1" in str(caught.value)
    with pytest.raises(SweepConfigError, match="above max"):
        seqs_config(start=32, max=16)
    with pytest.raises(SweepConfigError, match="unknown keys"):
        SweepConfig.from_dict({"param": "max_num_seqs", "start": 1, "repeats": 3})


def test_from_recipe_drops_the_loop_keys_and_infers_integer():
    section = {"param": "gpu_memory_utilization", "start": 0.5, "growth": 2, "step": 0.1,
               "max": 0.95, "values": None, "plateau_threshold": 0.05, "resolution": 0.02,
               "repeats": 3, "max_launches": 12, "budget": 15, "confirm_duration_s": 60,
               "objective_class": None, "remeasure_rounds": 2, "strategy": "auto"}
    assert set(section) >= LOOP_KEYS
    config = SweepConfig.from_recipe(section)
    assert config.integer is False and config.step == 0.1 and config.max_launches == 12
    assert SweepConfig.from_recipe({"param": "max_num_seqs", "start": 4}).integer is True


def test_config_fields_match_the_recipe_schema():
    schema = json.loads((Path(__file__).resolve().parents[4] / "schemas" / "recipe.v1.json")
                        .read_text())
    recipe_keys = set(schema["properties"]["sweep"]["properties"])
    strategy_keys = {item.name for item in fields(SweepConfig)} - {"integer", "multiple_of"}
    assert recipe_keys == strategy_keys | LOOP_KEYS


def test_memory_failure_kinds_cover_the_engine_classifier():
    from model_optimizer.engine.classify import MEMORY_CLASSES

    assert MEMORY_CLASSES <= MEMORY_FAILURE_KINDS
    assert "planner" in MEMORY_FAILURE_KINDS


def test_point_properties():
    point = Point(8, "grow", "ok", [10.0, 12.0, 11.0], launches=3)
    assert point.metric == 11.0 and point.spread == (10.0, 12.0)
    assert point.acceptable and math.isclose(point.relative_spread, 2 / 11)
    empty = Point(8, "grow", "failed", [], failure_kind="oom")
    assert empty.metric is None and empty.spread is None and not empty.acceptable


# --- property -----------------------------------------------------------------------------


@st.composite
def curves(draw):
    """A monotone-then-flat throughput curve on max_num_seqs with a random memory ceiling."""
    exponent = draw(st.integers(min_value=1, max_value=12))
    top = 2 ** exponent
    knee = draw(st.integers(min_value=1, max_value=top))
    shape = draw(st.floats(min_value=0.2, max_value=1.0))
    peak = draw(st.floats(min_value=0.5, max_value=200.0))
    ceiling = draw(st.none() | st.integers(min_value=2, max_value=top))
    threshold = draw(st.sampled_from([0.01, 0.02, 0.05, 0.1, 0.2]))
    return top, knee, shape, peak, ceiling, threshold


@settings(max_examples=300, deadline=None)
@given(curves())
def test_search_terminates_never_crosses_a_ceiling_never_repeats_and_chooses_near_the_best(
        curve):
    top, knee, shape, peak, ceiling, threshold = curve
    config = seqs_config(max=top, plateau_threshold=threshold)

    def measure(value, phase):
        if ceiling is not None and value >= ceiling:
            return Point(value, phase, "failed", [], failure_kind="kv_cache_too_small",
                         launches=1)
        return Point(value, phase, "ok", [peak * (min(value, knee) / knee) ** shape],
                     launches=1)

    history: list[Point] = []
    # growth plus one bisection of the knee; a ceiling bracket may add a second bisection
    steps = math.log2(top)
    bound = 2 * steps + 6 if ceiling is None else len(grow_sequence(config)) + 2 * steps
    while True:
        decision = next_value(config, history)
        if decision.value is None:
            break
        failed = [p.value for p in history if p.status != "ok"]
        assert not failed or decision.value < min(failed)
        assert decision.value not in tried(history)
        assert 1 <= decision.value <= top
        history.append(measure(decision.value, decision.phase))
        assert len(history) <= bound
    acceptable = [p for p in history if p.acceptable]
    chosen, _ = choose(config, history)
    if not acceptable:
        assert chosen is None
        return
    best = max(p.metric for p in acceptable)
    assert chosen.acceptable and chosen.metric >= (1 - threshold) * best


@settings(max_examples=200, deadline=None)
@given(st.data(), st.integers(min_value=1, max_value=7),
       st.sampled_from([0.0, 0.05, 0.3]), st.booleans())
def test_any_noisy_history_terminates_without_repeats_or_crossing_a_failure(
        data, exponent, threshold, with_step):
    top = 2 ** exponent
    config = seqs_config(max=top, plateau_threshold=threshold, step=3 if with_step else None)
    outcomes = st.one_of(
        st.lists(st.floats(min_value=0, max_value=100), min_size=1, max_size=3),
        st.sampled_from(["oom", "engine_died", "planner", "slo", "preempted"]))
    history: list[Point] = []
    for _ in range(top + 1):
        decision = next_value(config, history)
        if decision.value is None:
            break
        failed = [p.value for p in history if p.status != "ok"]
        assert not failed or decision.value < min(failed)
        assert decision.value not in tried(history) and 1 <= decision.value <= top
        outcome = data.draw(outcomes)
        if outcome == "planner":
            point = Point(decision.value, decision.phase, "skipped", [], failure_kind="planner")
        elif isinstance(outcome, str) and outcome in ("oom", "engine_died"):
            point = Point(decision.value, decision.phase, "failed", [], failure_kind=outcome)
        else:
            samples = [10.0] if isinstance(outcome, str) else outcome
            point = Point(decision.value, decision.phase, "ok", samples,
                          slo_met=outcome != "slo", preemptions=int(outcome == "preempted"))
        history.append(point)
    else:
        raise AssertionError("the search did not terminate")
    assert decision.stop_rule in STOP_RULES
    chosen, reason = choose(config, history)
    assert (chosen is None) == (not any(p.acceptable for p in history)) and reason
