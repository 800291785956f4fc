"""`mopt tune` on the real vLLM CPU server and the tiny local model, with a tiny budget:
impossible combinations pruned by the planner, the feasible one launched, measured and
written. Each trial scanning max_num_seqs on one launch is test_tune_scan.py. The shipped
space end to end (four trials), interrupt + resume and two workers on one PostgreSQL study
test orchestration only: they run on the mock engine in
tests/unit/search/tune/test_tune_cli_mock.py."""

from __future__ import annotations

import pytest
from optuna.trial import TrialState

from tests.unit.search.tune.archive_checks import (
    FINISHED,
    assert_written_best,
    local_study,
    tune_archives,
)

from .conftest import TINY_RECIPE, run_mopt

pytestmark = pytest.mark.integration
#: a small load, one launch per trial (scanning max_num_seqs is test_tune_scan.py's subject)
SMALL_LOAD = ("--set", "workload.num_requests=20", "--set", "workload.warmup_requests=2",
              "--set", "workload.warmup_steady_max_s=null", "--no-scan")




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
