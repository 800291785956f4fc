"""The search space (values, seeds, trial recipes) and a trial's verdict (objective,
constraints)."""

from __future__ import annotations

import math

import optuna
import pytest
from hypothesis import given
from hypothesis import strategies as st

from model_optimizer.errors import UsageError
from model_optimizer.search.measure import Measurement
from model_optimizer.search.tune.evaluate import (
    TrialResult,
    constraint_values,
    objective_values,
    read_trial_result,
    slo_margin,
)
from model_optimizer.search.tune.space import (
    ParamSpec,
    TuneConfig,
    TuneFlags,
    planner_seed,
    recipe_seed,
    same_value,
    trial_recipe,
)

SECTION = {"params": {"max_num_seqs": {"type": "int_log", "low": 1, "high": 32},
                      "block_size": {"type": "categorical", "choices": [32, 64, 128]},
                      "enable_prefix_caching": {"type": "categorical",
                                                "choices": [False, True]}},
           "objective": "throughput", "second_objective": None, "n_trials": 12,
           "max_minutes": None, "sampler": "tpe", "seed": 0, "repeats": 1}


def test_values_sizes_and_membership():
    config = TuneConfig.from_recipe(SECTION)
    seqs, block, prefix = config.params
    assert seqs.values() == [1, 2, 4, 8, 16, 32] and seqs.size() == 32
    assert seqs.contains(5) and not seqs.contains(33) and not seqs.contains(True)
    assert block.contains(64) and not block.contains(48)
    assert prefix.contains(True) and not prefix.contains(1)  # True is not 1 here
    assert config.space_size() == 32 * 3 * 2
    assert len(config.grid()) == 6 * 3 * 2
    stepped = ParamSpec.from_recipe("block_size", {"type": "int", "low": 32, "high": 128,
                                                   "step": 32})
    assert stepped.values() == [32, 64, 96, 128] and not stepped.contains(48)
    fraction = ParamSpec.from_recipe("gpu_memory_utilization", {"type": "float", "low": 0.8,
                                                                "high": 0.95, "step": 0.05})
    assert fraction.values() == [0.8, 0.85, 0.9, 0.95] and fraction.contains(0.85)


def test_largest_at_most_follows_the_grid():
    seqs = ParamSpec.from_recipe("max_num_seqs", {"type": "int", "low": 4, "high": 64,
                                                  "step": 4})
    assert seqs.largest_at_most(30) == 28 and seqs.largest_at_most(1000) == 64
    assert seqs.largest_at_most(3) is None
    block = ParamSpec.from_recipe("block_size", {"type": "categorical",
                                                 "choices": [32, 64, 128]})
    assert block.largest_at_most(100) == 64


def test_seeds_and_overrides():
    config = TuneConfig.from_recipe(SECTION)
    engine = {"max_num_seqs": 8, "block_size": 16, "enable_prefix_caching": None}
    assert recipe_seed(config, engine) == {"max_num_seqs": 8}  # 16 is outside the space
    assert planner_seed(config, engine, 20) == {"max_num_seqs": 20}



def test_a_trial_recipe_sets_typed_values_recorded_as_the_trial():
    from pathlib import Path

    from model_optimizer.recipe import load_recipe

    loaded = load_recipe(Path(__file__).resolve().parents[4] / "recipes" / "tiny-cpu.yaml")
    step = trial_recipe(loaded, {"max_num_seqs": 8.0, "enable_prefix_caching": True})
    assert step.resolved["engine"]["max_num_seqs"] == 8
    assert type(step.resolved["engine"]["max_num_seqs"]) is int  # 8, never "8.0" in argv
    assert step.resolved["engine"]["enable_prefix_caching"] is True
    assert {v.source for v in step.varied_values} == {
        "tune trial max_num_seqs 8, enable_prefix_caching True"}


def test_suggestions_stay_in_the_space():
    config = TuneConfig.from_recipe(SECTION)
    study = optuna.create_study(direction="maximize",
                                sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(30):
        trial = study.ask()
        params = {spec.name: spec.suggest(trial) for spec in config.params}
        assert all(spec.contains(params[spec.name]) for spec in config.params)
        study.tell(trial, 1.0)


def test_bad_flags_and_empty_space_are_usage_errors():
    with pytest.raises(UsageError, match="tune.params is empty"):
        TuneConfig.from_recipe({**SECTION, "params": {}})
    with pytest.raises(UsageError, match="--sampler"):
        TuneConfig.from_recipe(SECTION, TuneFlags(sampler="annealing"))
    continuous = {**SECTION, "params": {"gpu_memory_utilization": {
        "type": "float", "low": 0.5, "high": 0.9}}}
    with pytest.raises(UsageError, match="finite space"):
        TuneConfig.from_recipe(continuous).grid()
    assert TuneConfig.from_recipe(continuous).space_size() is None


@given(st.integers(1, 1000), st.integers(1, 1000))
def test_same_value_tells_bool_from_int(a, b):
    assert same_value(a, b) == (a == b)
    assert not same_value(True, 1) and same_value(True, True)


def ok(figures, samples=(10.0,)):
    return TrialResult(Measurement("ok", samples=list(samples), slo_met=True,
                                   figures=figures), [figures])


BOUNDS = {"ttft_p99_ms": 1000.0, "min_success_rate": 1.0}


def test_constraints_are_relative_margins_of_the_worst_repeat():
    inside = ok({"ttft_p99_ms": 800.0, "success_rate": 1.0})
    assert constraint_values(inside, BOUNDS) == {"launch": 0.0, "ttft_p99_ms": -0.2,
                                                 "min_success_rate": 0.0}
    repeats = TrialResult(Measurement("ok", samples=[1, 2]),
                          [{"ttft_p99_ms": 900.0, "success_rate": 1.0},
                           {"ttft_p99_ms": 1500.0, "success_rate": 0.9}])
    assert constraint_values(repeats, BOUNDS) == {"launch": 0.0, "ttft_p99_ms": 0.5,
                                                  "min_success_rate": pytest.approx(0.1)}
    no_data = ok({"success_rate": 1.0})
    assert constraint_values(no_data, BOUNDS)["ttft_p99_ms"] == 1.0
    assert slo_margin("min_qps", 10.0, {"qps": 12.0}) == pytest.approx(-0.2)


def test_failed_and_skipped_trials_are_infeasible():
    failed = TrialResult(Measurement("failed", failure_kind="oom", run_ids=["r"]),
                         failure={"class": "oom", "evidence": ["CUDA out of memory"]})
    skipped = TrialResult(Measurement("skipped", failure_kind="planner", reason="too big"))
    for result in (failed, skipped):
        assert set(constraint_values(result, BOUNDS).values()) == {1.0}
    config = TuneConfig.from_recipe({**SECTION, "second_objective": "ttft_p99"})
    assert objective_values(failed, config) == [0.0, math.inf]
    assert objective_values(skipped, config) is None
    assert failed.log_excerpt() == ["CUDA out of memory"]
    good = TrialResult(Measurement("ok", samples=[3.0, 1.0, 2.0]),
                       [{"ttft_p99_ms": v} for v in (5.0, 7.0, 6.0)])
    assert objective_values(good, config) == [2.0, 6.0]  # medians


def test_read_trial_result_from_the_run_archives(tmp_path):
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "metrics.json").write_text('{"qps": 4.0}')
    (tmp_path / "r2").mkdir()
    (tmp_path / "r2" / "failure.json").write_text('{"class": "oom", "evidence": ["x"]}')
    result = read_trial_result(Measurement("failed", run_ids=["r1", "r2"]), tmp_path)
    assert result.run_metrics == [{"qps": 4.0}] and result.failure["class"] == "oom"
