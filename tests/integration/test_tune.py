"""`mopt tune` on the real vLLM CPU server and the tiny local model, with tiny budgets: the
shipped space end to end, impossible combinations, interrupt + resume, and two workers on one
study in a real PostgreSQL server."""

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

from model_optimizer.recipe import load_recipe
from model_optimizer.tune.study import sqlite_url

from .conftest import MOPT, ROOT, TINY_RECIPE, exit_code, run_mopt, start_mopt

pytestmark = pytest.mark.integration
#: a small load, one launch per trial (scanning max_num_seqs is test_tune_scan.py's subject)
SMALL_LOAD = ("--set", "workload.num_requests=20", "--set", "workload.warmup_requests=2",
              "--no-scan")
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


def local_study(archive: Path) -> optuna.Study:
    return optuna.load_study(study_name=archive.name, storage=sqlite_url(archive / "study.db"))


def tune_archives(runs: Path) -> list[Path]:
    return sorted(p for p in runs.iterdir() if p.is_dir()) if runs.exists() else []


def assert_trials_archived(trials: list, archives: list[Path]) -> None:
    """Every launched trial's runs are archived, once, under the steps/ of one worker."""
    for trial in trials:
        for run_id in trial.user_attrs["run_ids"]:
            homes = [a for a in archives if (a / "steps" / run_id / "status.json").is_file()]
            assert len(homes) == 1, (trial.number, run_id, homes)
            assert homes[0].name == trial.user_attrs["worker"]


def assert_written_best(output: Path, study: optuna.Study, best_number: int) -> None:
    written = load_recipe(output)  # validates
    best = next(t for t in study.trials if t.number == best_number)
    assert best.user_attrs["feasible"]
    feasible = [t.values[0] for t in study.get_trials(states=FINISHED)
                if t.user_attrs.get("feasible")]
    assert best.values[0] == max(feasible)
    for name, value in best.params.items():
        assert written.resolved["engine"][name] == value
    assert written.resolved["validated"]["by"] == "tune"


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


def wait_for_runs(folder: Path, count: int, proc: subprocess.Popen, timeout: float = 600):
    """Wait until ``folder`` holds ``count`` run archives, the last one starting vLLM."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "mopt tune exited early"
        runs = sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
        if len(runs) >= count and (runs[-1] / "run.json").is_file():
            return runs
        time.sleep(0.3)
    raise AssertionError(f"{count} runs did not start in time")


def test_interrupt_then_resume_reruns_no_finished_trial(tiny_model, tmp_path):
    runs, output = tmp_path / "runs", tmp_path / "tuned.yaml"
    space = ("--set", "tune.params={max_num_seqs: {type: categorical, choices: [2, 4]}}",
             "--set", "tune.sampler=grid", "--set", "tune.n_trials=2")
    proc = start_mopt("tune", str(TINY_RECIPE), *SMALL_LOAD, *space, "--runs-dir", str(runs),
                      "--output", str(output), log=tmp_path / "first.log")
    try:
        while not tune_archives(runs):
            time.sleep(0.3)
        [archive] = tune_archives(runs)
        first_run, _ = wait_for_runs(archive / "steps", 2, proc)  # trial 0 done, 1 starting
        os.killpg(proc.pid, signal.SIGINT)
        assert exit_code(proc, tmp_path / "first.log", 120) == 130
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    status = json.loads((archive / "status.json").read_text())
    assert status["status"] == "interrupted" and not output.exists()
    before = local_study(archive)
    [done] = before.get_trials(states=FINISHED)
    assert done.user_attrs["run_ids"] == [first_run.name]
    assert before.get_trials(states=(TrialState.FAIL,))[0].user_attrs["interrupted"]

    result = run_mopt("tune", "--resume", str(archive), "--json", timeout=900)
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
def test_two_workers_share_one_postgresql_study(tiny_model, tmp_path, pg_url):
    name = f"mopt-test-{uuid.uuid4().hex[:8]}"
    output = tmp_path / "tuned.yaml"
    args = ("tune", str(TINY_RECIPE), *SMALL_LOAD, "--set", "tune.n_trials=4",
            "--storage", pg_url, "--study-name", name, "--output", str(output), "--json")
    workers = []
    for index in range(2):
        runs = tmp_path / f"worker{index}"
        log = open(tmp_path / f"worker{index}.json", "w")  # noqa: SIM115 - closed below
        workers.append((runs, log, subprocess.Popen(
            [*MOPT, *args, "--runs-dir", str(runs)], stdout=log,
            stderr=open(tmp_path / f"worker{index}.log", "w"), cwd=ROOT,  # noqa: SIM115
            start_new_session=True)))
    try:
        codes = [proc.wait(timeout=1800) for _, _, proc in workers]
    finally:
        for _, log, proc in workers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            log.close()
    logs = "".join((tmp_path / f"worker{i}.log").read_text() for i in range(2))
    assert codes == [0, 0], logs
    study = optuna.load_study(study_name=name, storage=pg_url)
    try:
        trials = study.trials
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
