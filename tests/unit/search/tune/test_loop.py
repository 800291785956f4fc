"""The tune loop with an injected measurement: feasibility, failures as data, pruning, seeds,
the written revision, duplicates, interrupt + resume, and a budget shared through storage."""

from __future__ import annotations

import csv
import json
import time

import optuna
import pytest
from optuna.trial import TrialState

from model_optimizer.errors import UsageError
from model_optimizer.recipe import load_recipe
from model_optimizer.search.tune import TuneFlags, resume_tune, start_tune
from model_optimizer.search.tune.study import sqlite_url

from .conftest import FakeMeasure


def load_study(outcome) -> optuna.Study:
    return optuna.load_study(study_name=outcome.study_name,
                             storage=sqlite_url(outcome.archive / "study.db"))


def finished(study) -> list:
    return study.get_trials(states=(TrialState.COMPLETE, TrialState.PRUNED))


def tune(recipe, tmp_path, measure, *overrides, **flags):
    loaded = load_recipe(recipe, list(overrides))
    return start_tune(loaded, tmp_path / "runs", flags=TuneFlags(**flags),
                      output=tmp_path / "out.yaml", measure=measure)


def test_best_feasible_trial_is_written_as_a_validated_revision(make_recipe, tmp_path):
    measure = FakeMeasure()
    outcome = tune(make_recipe(), tmp_path, measure, n_trials=10)
    assert outcome.exit_code == 0 and outcome.written == tmp_path / "out.yaml"
    study = load_study(outcome)
    trials = finished(study)
    assert len(trials) == 10 and not study.get_trials(states=(TrialState.RUNNING,))
    feasible = [t for t in trials if t.user_attrs.get("feasible")]
    best_value = max(t.values[0] for t in feasible)
    assert outcome.best["values"][0] == best_value
    written = load_recipe(tmp_path / "out.yaml")
    for name, value in outcome.best["params"].items():
        assert written.resolved["engine"][name] == value
    assert written.resolved["revision"] == 2
    validated = written.resolved["validated"]
    assert validated["by"] == "tune" and validated["run_id"] == outcome.tune_id
    assert validated["metrics"]["qps"] == best_value
    for infeasible in (t for t in trials if t.user_attrs.get("status") == "ok"
                       and t.params["max_num_seqs"] > 15):
        assert not infeasible.user_attrs["feasible"]
        assert infeasible.constraints["ttft_p99_ms"] > 0  # the TTFT margin, violated
    rows = list(csv.DictReader((outcome.archive / "trials.csv").open()))
    assert [int(r["number"]) for r in rows] == [t.number for t in trials]
    summary = json.loads((outcome.archive / "summary.json").read_text())
    assert summary["best"] == outcome.best["number"]
    report = (outcome.archive / "report.md").read_text()
    assert "## What mattered most" in report and "mattered most" in report
    for plot in ("history.png", "pareto.png"):
        assert (outcome.archive / plot).stat().st_size > 5000


def test_failed_launch_is_an_infeasible_finished_trial_with_its_class(make_recipe, tmp_path):
    space = """tune:
  params:
    max_num_seqs: {type: categorical, choices: [4, 16]}
    block_size: {type: categorical, choices: [64, 128]}
  sampler: grid
  n_trials: 4
"""
    outcome = tune(make_recipe(space, slo_ttft_p99_ms=5000), tmp_path, FakeMeasure())
    trials = finished(load_study(outcome))
    [failed] = [t for t in trials if t.params == {"max_num_seqs": 16, "block_size": 128}]
    assert failed.state == TrialState.COMPLETE and failed.values == [0.0]
    assert failed.user_attrs["failure_kind"] == "kv_cache_too_small"
    assert "max seq len" in failed.user_attrs["log_excerpt"][0]
    assert failed.user_attrs["run_ids"] == [f"run-{failed.number}"]
    assert failed.constraints == {"launch": 1.0, "ttft_p99_ms": 1.0, "min_success_rate": 1.0}
    assert not failed.user_attrs["feasible"]
    assert outcome.best["params"] == {"max_num_seqs": 16, "block_size": 64}  # still chosen
    report = (outcome.archive / "report.md").read_text()
    assert "kv_cache_too_small" in report and "max seq len" in report


def test_planner_and_rules_prune_without_a_launch(make_recipe, tmp_path):
    space = """tune:
  params:
    max_num_seqs: {type: categorical, choices: [8, 32, 4096]}
  sampler: grid
  n_trials: 3
"""
    measure = FakeMeasure()
    outcome = tune(make_recipe(space), tmp_path, measure)
    trials = {t.params["max_num_seqs"]: t for t in finished(load_study(outcome))}
    planner, rules = trials[32], trials[4096]  # 4096 > max_num_batched_tokens 2048
    assert planner.state == TrialState.PRUNED and planner.user_attrs["failure_kind"] == "planner"
    assert "KV cache" in planner.user_attrs["reason"]
    assert rules.state == TrialState.PRUNED and rules.user_attrs["failure_kind"] == "rules"
    assert "max_num_batched_tokens" in rules.user_attrs["reason"]
    assert rules.user_attrs["run_ids"] == [] and {"max_num_seqs": 4096} not in measure.calls
    assert outcome.best["params"] == {"max_num_seqs": 8}


def test_seeds_come_first_recipe_values_then_the_planner(make_recipe, tmp_path):
    outcome = tune(make_recipe(), tmp_path, FakeMeasure(), n_trials=3)
    trials = sorted(finished(load_study(outcome)), key=lambda t: t.number)
    assert trials[0].user_attrs["seed"] == "recipe"
    assert trials[0].params == {"max_num_seqs": 8, "block_size": 32}  # tiny-cpu.yaml's values
    assert trials[1].user_attrs["seed"] == "planner"  # KV for 5,461 sequences: the space's top
    assert trials[1].params == {"max_num_seqs": 32, "block_size": 32}
    assert trials[1].state == TrialState.PRUNED  # ... which the (fake) planner then skips


def test_a_repeated_configuration_is_copied_not_relaunched(make_recipe, tmp_path):
    space = """tune:
  params:
    block_size: {type: categorical, choices: [32, 64]}
  n_trials: 6
"""
    measure = FakeMeasure()
    outcome = tune(make_recipe(space), tmp_path, measure)
    trials = finished(load_study(outcome))
    assert len(measure.calls) == 2 == len({json.dumps(c) for c in measure.calls})
    copies = [t for t in trials if "duplicate_of" in t.user_attrs]
    assert all(t.user_attrs["launches"] == 0 for t in copies)
    assert json.loads((outcome.archive / "state.json").read_text())["stop"]["reason"].startswith(
        "every one of the 2 configurations")


def test_interrupt_then_resume_reruns_no_finished_trial(make_recipe, tmp_path):
    first = FakeMeasure(interrupt_at=3)
    with pytest.raises(KeyboardInterrupt):
        tune(make_recipe(), tmp_path, first, n_trials=6)
    [tune_dir] = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    status = json.loads((tune_dir / "status.json").read_text())
    assert status["status"] == "interrupted" and "--resume" in status["resume"]
    assert not (tmp_path / "out.yaml").exists()
    study = optuna.load_study(study_name=tune_dir.name, storage=sqlite_url(tune_dir /
                                                                          "study.db"))
    [interrupted] = study.get_trials(states=(TrialState.FAIL,))
    assert interrupted.user_attrs["interrupted"] is True
    done_before = {t.number for t in finished(study)}
    assert len(done_before) == 2

    second = FakeMeasure()
    outcome = resume_tune(tune_dir, measure=second)
    assert outcome.exit_code == 0
    study = load_study(outcome)
    trials = finished(study)
    assert len(trials) == 6  # the interrupted trial does not use the budget
    assert len(first.calls) + len(second.calls) == 6 + 0  # nothing measured twice ...
    assert second.calls[0] == interrupted.params  # ... and the interrupted one first again
    assert not done_before & set(json.loads((tune_dir / "state.json").read_text())
                                 ["trials_here"][2:])
    with pytest.raises(UsageError, match="already finished"):
        resume_tune(tune_dir)


def test_workers_share_one_budget_through_the_storage(make_recipe, tmp_path):
    shared = sqlite_url(tmp_path / "shared.db")
    loaded = load_recipe(make_recipe())
    first = start_tune(loaded, tmp_path / "a", flags=TuneFlags(n_trials=3), storage=shared,
                       study_name="s", output=tmp_path / "a.yaml", measure=FakeMeasure())
    late = FakeMeasure()
    second = start_tune(loaded, tmp_path / "b", storage=shared, study_name="s",
                        output=tmp_path / "b.yaml", measure=late)
    assert late.calls == []  # the study's budget (3, stored by the first) is used
    assert second.best["number"] == first.best["number"] and second.written
    with pytest.raises(UsageError, match="another space"):
        other = load_recipe(make_recipe(), ["tune.params.max_num_seqs.high=16"])
        start_tune(other, tmp_path / "c", storage=shared, study_name="s",
                   measure=FakeMeasure())
    with pytest.raises(UsageError, match="--study-name"):
        start_tune(loaded, tmp_path / "d", storage=shared, measure=FakeMeasure())


def test_nothing_feasible_exits_4(make_recipe, tmp_path):
    outcome = tune(make_recipe(slo_ttft_p99_ms=50), tmp_path, FakeMeasure(), n_trials=3)
    assert outcome.exit_code == 4 and outcome.written is None
    assert "no trial was feasible" in outcome.reason
    assert (outcome.archive / "report.md").exists()


def test_second_objective_makes_a_pareto_front(make_recipe, tmp_path):
    outcome = tune(make_recipe(), tmp_path, FakeMeasure(), "tune.second_objective=ttft_p99",
                   n_trials=8)
    study = load_study(outcome)
    assert [d.name for d in study.directions] == ["MAXIMIZE", "MINIMIZE"]
    failed = [t for t in study.trials if t.user_attrs.get("status") == "failed"]
    assert all(t.values[1] == float("inf") for t in failed)
    summary = json.loads((outcome.archive / "summary.json").read_text())
    assert summary["pareto_front"] and outcome.best["number"] in summary["pareto_front"]
    assert outcome.written is not None


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")
def test_a_dead_workers_trial_is_failed_and_enqueued_again(make_recipe, tmp_path, monkeypatch):
    from model_optimizer.search.tune import study as study_module

    monkeypatch.setattr(study_module, "HEARTBEAT_S", 1)
    monkeypatch.setattr(study_module, "GRACE_S", 1)
    storage = study_module.make_storage(sqlite_url(tmp_path / "s.db"))
    study = optuna.create_study(storage=storage, study_name="s", direction="maximize")
    trial = study.ask({"max_num_seqs": optuna.distributions.IntDistribution(1, 32)})
    storage.record_heartbeat(trial._trial_id)  # then the worker dies: no more heartbeats
    deadline = time.monotonic() + 10
    while not study.get_trials(states=(TrialState.FAIL,)):
        assert time.monotonic() < deadline
        time.sleep(0.5)
        study_module.fail_stale_trials(study)
    [retry] = study.get_trials(states=(TrialState.WAITING,))
    assert retry.system_attrs["fixed_params"] == trial.params  # asked first, as enqueued
    assert retry.user_attrs["retry_of"] == trial.number
    assert study_module.budget_used(study.trials) == 1  # the dead trial does not count
