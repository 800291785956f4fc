"""`mopt tune` on the real vLLM CPU server and the tiny local model, with tiny budgets: the
shipped space end to end and impossible combinations pruned by the planner. Interrupt +
resume and two workers on one PostgreSQL study test orchestration only: they run on the mock
engine in tests/unit/tune/test_tune_cli_mock.py."""

from __future__ import annotations

import json

import pytest
from optuna.trial import TrialState

from tests.unit.tune.archive_checks import (
    FINISHED,
    assert_trials_archived,
    assert_written_best,
    local_study,
    tune_archives,
)

from .conftest import TINY_RECIPE, run_mopt

pytestmark = pytest.mark.integration
#: a small load, one launch per trial (scanning max_num_seqs is test_tune_scan.py's subject)
SMALL_LOAD = ("--set", "workload.num_requests=20", "--set", "workload.warmup_requests=2",
              "--no-scan")




@pytest.mark.slow  # four launches: the quick tier keeps the one-launch pruning test below
def test_tune_tiny_cpu_end_to_end(tiny_model, tmp_path):
    runs, output = tmp_path / "runs", tmp_path / "tuned.yaml"
    result = run_mopt("tune", str(TINY_RECIPE), *SMALL_LOAD, "--set", "tune.n_trials=4",
                      "--runs-dir", str(runs), "--output", str(output), "--json", timeout=1500)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout)
    [archive] = tune_archives(runs)
    assert summary["archive"] == str(archive) and summary["written"] == str(output)
    study = local_study(archive)
    trials = study.get_trials(states=FINISHED)
    assert len(trials) == 4 and len(study.trials) == 4
    assert trials[0].user_attrs["seed"] == "recipe"
    assert trials[0].params == {"max_num_seqs": 8, "block_size": 32}
    assert_trials_archived(trials, [archive])
    launched = [t for t in trials if t.user_attrs["run_ids"]]
    assert launched and all((archive / "steps" / t.user_attrs["run_ids"][0] /
                             "metrics.json").is_file() for t in launched)
    assert_written_best(output, study, summary["best"]["number"])
    for name in ("trials.csv", "summary.json", "report.md", "history.png", "pareto.png",
                 "recipe.written.yaml"):
        assert (archive / name).is_file(), name
    assert len((archive / "trials.csv").read_text().splitlines()) == 5
    assert "mattered most" in (archive / "report.md").read_text()


def test_impossible_combinations_are_pruned_and_the_best_feasible_chosen(tiny_model,
                                                                          tmp_path):
    """8192 sequences exceed what the KV cache holds without preemption, max_model_len 4096
    exceeds the model's 2048 positions: the planner prunes both, without a launch."""
    runs, output = tmp_path / "runs", tmp_path / "tuned.yaml"
    space = ("--set", "tune.params={max_num_seqs: {type: categorical, choices: [4, 8192]}, "
             "max_model_len: {type: categorical, choices: [512, 4096]}}",
             "--set", "tune.sampler=grid", "--set", "tune.n_trials=4",
             "--set", "engine.max_num_batched_tokens=8192")
    result = run_mopt("tune", str(TINY_RECIPE), *SMALL_LOAD, *space, "--runs-dir", str(runs),
                      "--output", str(output), "--json", timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    [archive] = tune_archives(runs)
    study = local_study(archive)
    trials = {(t.params["max_num_seqs"], t.params["max_model_len"]): t
              for t in study.get_trials(states=FINISHED)}
    assert len(trials) == 4
    for combo in ((4, 4096), (8192, 512), (8192, 4096)):
        pruned = trials[combo]
        assert pruned.state == TrialState.PRUNED, combo
        assert pruned.user_attrs["failure_kind"] == "planner" and pruned.user_attrs["reason"]
        assert pruned.user_attrs["run_ids"] == []
    assert "max_position_embeddings" in trials[(4, 4096)].user_attrs["reason"]
    assert "without preemption" in trials[(8192, 512)].user_attrs["reason"]
    good = trials[(4, 512)]
    assert good.state == TrialState.COMPLETE and good.user_attrs["feasible"]
    assert [p.name for p in (archive / "steps").iterdir() if p.is_dir()] == \
        good.user_attrs["run_ids"]  # one launch in all
    assert_written_best(output, study, good.number)
    report = (archive / "report.md").read_text()
    assert "planner" in report and "max_position_embeddings" in report
