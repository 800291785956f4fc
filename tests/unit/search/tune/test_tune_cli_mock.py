"""`mopt tune` on the command line with the mock engine (``tests/unit/mock_mopt.py``: real
processes, HTTP, archives and optuna storage, no vLLM; ``--resume`` runs in this process):
the shipped space end to end, Ctrl-C then ``--resume`` reruns no finished trial, and two
workers share one study in a real PostgreSQL server. The real-vLLM tune (the planner's
pruning, a scanning tune) is tests/integration/test_tune.py and test_tune_scan.py."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from tests.unit.mock_mopt import DEFAULT_ENGINE, MOCK_MOPT, ROOT, mock_env, start_mock_mopt
from tests.unit.mock_mopt import invoke_mock_mopt as run_mopt
from tests.unit.search.tune.archive_checks import (
    FINISHED,
    assert_trials_archived,
    assert_written_best,
    local_study,
    tune_archives,
)

TINY_RECIPE = ROOT / "recipes" / "tiny-cpu.yaml"
SMALL_LOAD = ("--set", "workload.num_requests=20", "--set", "workload.warmup_requests=2",
              "--set", "workload.duration_s=null", "--set", "workload.output_tokens=8",
              "--set", "workload.warmup_steady_max_s=null", "--no-scan")
#: a mock that takes 3 s to get healthy: Ctrl-C lands while the second trial starts
SLOW_START = {**DEFAULT_ENGINE, "startup_s": 3}




def wait_for_runs(folder: Path, count: int, proc: subprocess.Popen, timeout: float = 300):
    """Wait until ``folder`` holds ``count`` run archives, the last one's server started
    (its log open) and half a second into its 3 s start: a Ctrl-C then lands in the wait for
    health, not in the fork itself, where Python drops it (``logging``'s at-fork hook)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "mopt tune exited early"
        runs = sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
        if len(runs) >= count and (runs[-1] / "engine.log").is_file():
            time.sleep(0.5)
            return runs
        time.sleep(0.1)
    raise AssertionError(f"{count} runs did not start in time")


@pytest.mark.slow  # several seconds: real processes (quick tier: not slow)
def test_interrupt_then_resume_reruns_no_finished_trial(tiny_model_dir, tmp_path):
    runs, output = tmp_path / "runs", tmp_path / "tuned.yaml"
    space = ("--set", "tune.params={max_num_seqs: {type: categorical, choices: [2, 4]}}",
             "--set", "tune.sampler=grid", "--set", "tune.n_trials=2")
    proc = start_mock_mopt("tune", str(TINY_RECIPE), *SMALL_LOAD, *space, "--runs-dir",
                           str(runs), "--output", str(output), log=tmp_path / "first.log",
                           engine=SLOW_START)
    try:
        while not tune_archives(runs):
            assert proc.poll() is None, (tmp_path / "first.log").read_text()
            time.sleep(0.1)
        [archive] = tune_archives(runs)
        first_run, _ = wait_for_runs(archive / "steps", 2, proc)  # trial 0 done, 1 starting
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(120) == 130, (tmp_path / "first.log").read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    status = json.loads((archive / "status.json").read_text())
    assert status["status"] == "interrupted" and not output.exists()
    before = local_study(archive)
    [done] = before.get_trials(states=FINISHED)
    assert done.user_attrs["run_ids"] == [first_run.name]
    assert before.get_trials(states=(TrialState.FAIL,))[0].user_attrs["interrupted"]

    result = run_mopt("tune", "--resume", str(archive), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    study = local_study(archive)
    finished = study.get_trials(states=FINISHED)
    assert len(finished) == 2 and {t.params["max_num_seqs"] for t in finished} == {2, 4}
    rerun = next(t for t in finished if t.number != done.number)
    assert rerun.user_attrs["retry_of"] is not None
    assert next(t for t in finished if t.number == done.number).user_attrs["run_ids"] == \
        [first_run.name]  # not rerun
    run_dirs = [p.name for p in (archive / "steps").iterdir() if p.is_dir()]
    assert len(run_dirs) == 3  # the finished run, the interrupted start, the rerun
    assert_written_best(output, study, json.loads(result.stdout)["best"]["number"])


@pytest.mark.slow  # several seconds: real processes (quick tier: not slow)
def test_the_shipped_space_end_to_end(tiny_model_dir, tmp_path):
    """The tiny recipe's own tune section (max_num_seqs and block_size), four trials with a
    launch each: the first at the recipe's values, every artefact written, the best trial
    written as the next revision. (On vLLM: the planner's pruning and a scanning tune,
    tests/integration/test_tune.py and test_tune_scan.py.)"""
    runs, output = tmp_path / "runs", tmp_path / "tuned.yaml"
    result = run_mopt("tune", str(TINY_RECIPE), *SMALL_LOAD, "--set", "tune.n_trials=4",
                      "--runs-dir", str(runs), "--output", str(output), "--json")
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


@pytest.fixture
def pg_url() -> str:
    """The PostgreSQL server .ci/run starts; missing in CI is a failure, elsewhere a skip."""
    url = os.environ.get("MOPT_TEST_PG_URL")
    if url:
        return url
    message = ("MOPT_TEST_PG_URL is not set: the distributed tune test needs a PostgreSQL "
               "server (bash examples/setup-postgres.sh prints the URL to export)")
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.mark.postgres
@pytest.mark.slow  # several seconds: real processes (quick tier: not slow)
def test_two_workers_share_one_postgresql_study(tiny_model_dir, tmp_path, pg_url):
    name = f"mopt-test-{uuid.uuid4().hex[:8]}"
    output = tmp_path / "tuned.yaml"
    args = ("tune", str(TINY_RECIPE), *SMALL_LOAD, "--set", "tune.n_trials=4",
            "--storage", pg_url, "--study-name", name, "--output", str(output), "--json")
    workers = []
    for index in range(2):
        runs = tmp_path / f"worker{index}"
        log = open(tmp_path / f"worker{index}.json", "w")  # noqa: SIM115 - closed below
        workers.append((runs, log, subprocess.Popen(
            [*MOCK_MOPT, *args, "--runs-dir", str(runs)], stdout=log, env=mock_env(),
            stderr=open(tmp_path / f"worker{index}.log", "w"), cwd=ROOT,  # noqa: SIM115
            start_new_session=True)))
    try:
        codes = [proc.wait(timeout=300) for _, _, proc in workers]
    finally:
        for _, log, proc in workers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            log.close()
    logs = "".join((tmp_path / f"worker{i}.log").read_text() for i in range(2))
    assert codes == [0, 0], logs
    study = optuna.load_study(study_name=name, storage=pg_url)
    try:
        # a worker that asks after the other took the last trial gets one more number, which
        # it tells FAIL as beyond the budget (study.py): never run, never counted
        extra = [t for t in study.trials if t.user_attrs.get("beyond_budget")]
        assert all(t.state == optuna.trial.TrialState.FAIL and "worker" not in t.user_attrs
                   for t in extra), extra
        trials = [t for t in study.trials if t not in extra]
        assert [t.number for t in trials] == [0, 1, 2, 3]
        assert all(t.state in FINISHED for t in trials), [t.state for t in trials]
        archives = [tune_archives(runs)[0] for runs, _, _ in workers]
        here = [json.loads((a / "state.json").read_text())["trials_here"] for a in archives]
        assert all(here) and not set(here[0]) & set(here[1])  # both worked, no trial twice
        assert sorted(here[0] + here[1]) == [0, 1, 2, 3]  # none lost
        for trial in trials:
            owner = archives[0] if trial.number in here[0] else archives[1]
            assert trial.user_attrs["worker"] == owner.name
            assert trial.user_attrs["machine"] and trial.user_attrs["pid"]
        assert_trials_archived(trials, archives)
        written = [json.loads((tmp_path / f"worker{i}.json").read_text())["written"]
                   for i in range(2)]
        assert str(output) in written  # the worker that finished last wrote the recipe
        best = json.loads((tmp_path / f"worker{written.index(str(output))}.json")
                          .read_text())["best"]
        assert_written_best(output, study, best["number"])
        assert all((a / "study.db").is_file() for a in archives)  # a copy of the study
    finally:
        optuna.delete_study(study_name=name, storage=pg_url)
