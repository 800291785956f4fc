"""`mopt sweep` on the real vLLM CPU server: plateau, memory ceiling, Ctrl-C and --resume."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from model_optimizer.recipe import load_recipe
from model_optimizer.sweep.strategy import STOP_RULES, Point, SweepConfig, choose

from .conftest import TINY_RECIPE, exit_code, run_mopt, start_mopt

pytestmark = pytest.mark.integration


@pytest.fixture
def recipe_copy(tmp_path, tiny_model) -> Path:
    """The tiny recipe in a scratch folder (a sweep rewrites its recipe file)."""
    path = tmp_path / "tiny-cpu.yaml"
    path.write_text(TINY_RECIPE.read_text().replace("../models/tiny-llama", str(tiny_model)))
    return path


def sweep_dir(runs: Path) -> Path:
    [folder] = [p for p in runs.iterdir() if p.is_dir()]
    return folder


def step_runs(folder: Path) -> list[dict]:
    """run.json of every step archive (measurements and confirmations)."""
    return [json.loads((p / "run.json").read_text()) | {
        "status": json.loads((p / "status.json").read_text())["status"]}
        for p in sorted((folder / "steps").iterdir())]


def wait_for_steps(folder_parent: Path, count: int, proc, timeout: float = 600) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "mopt sweep ended early"
        folders = [p for p in folder_parent.iterdir() if p.is_dir()] if folder_parent.exists() \
            else []
        if folders and (folders[0] / "state.json").exists():
            state = json.loads((folders[0] / "state.json").read_text())
            if len(state["history"]) >= count:
                return folders[0]
        time.sleep(0.5)
    raise AssertionError("the sweep did not reach the step in time")


def test_sweep_plateau_interrupt_and_resume(recipe_copy, tmp_path):
    runs = tmp_path / "runs"
    original = recipe_copy.read_text()
    args = ["sweep", str(recipe_copy), "--param", "max_num_seqs", "--start", "1",
            "--growth", "4", "--max", "16", "--runs-dir", str(runs),
            "--set", "sweep.resolution=8", "--set", "sweep.confirm_duration_s=5",
            "--set", "workload.num_requests=128", "--set", "sweep.remeasure_rounds=0",
            "--strategy", "relaunch"]  # one launch per step: probe-scan has its own test
    proc = start_mopt(*args, log=tmp_path / "first.log")
    try:
        folder = wait_for_steps(runs, 2, proc)
        proc.send_signal(signal.SIGINT)
        assert exit_code(proc, tmp_path / "first.log", 60) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "--resume" in (tmp_path / "first.log").read_text()
    before = json.loads((folder / "state.json").read_text())["history"]
    assert json.loads((folder / "status.json").read_text())["status"] == "interrupted"
    assert load_recipe(recipe_copy).resolved["revision"] == 1  # nothing written yet

    result = run_mopt("sweep", "--resume", str(folder), "--json", timeout=1200)
    assert result.returncode == 0, result.stdout + result.stderr
    outcome = json.loads(result.stdout)
    state = json.loads((folder / "state.json").read_text())
    history = [Point.from_dict(p) for p in state["history"]]
    values = [p.value for p in history]
    assert values[: len(before)] == [p["value"] for p in before]
    assert len(values) == len(set(values))
    measured = [r for r in step_runs(folder) if not r.get("confirm") and r["status"] == "ok"]
    for value in values:  # each finished step ran exactly once, none rerun after resume
        assert sum(r["value"] == value for r in measured) == 1

    summary = json.loads((folder / "summary.json").read_text())
    assert summary["stop"]["stop_rule"] in STOP_RULES
    assert summary["tie_concurrency"] is True
    config = SweepConfig.from_dict(state["config"])
    chosen, _ = choose(config, history)  # same measurements -> same choice
    assert outcome["chosen"]["value"] == chosen.value
    best = max(p.metric for p in history if p.acceptable)
    assert chosen.metric >= (1 - config.plateau_threshold) * best  # the knee, near the best
    if summary["stop"]["stop_rule"] == "plateau":
        assert chosen.value < max(values)

    written = load_recipe(recipe_copy)  # validates
    assert written.resolved["revision"] == 2
    assert written.resolved["engine"]["max_num_seqs"] == chosen.value
    validated = written.resolved["validated"]
    assert validated["run_id"] == folder.name and validated["by"] == "sweep"
    confirmation = summary["confirmations"][-1]
    assert confirmation["ok"] and confirmation["value"] == chosen.value
    assert validated["metrics"]["qps"] == pytest.approx(confirmation["figures"]["qps"])
    assert (folder / "recipe.given.yaml").read_text() == original  # the previous revision
    assert (folder / "plot.png").stat().st_size > 5000
    assert len((folder / "summary.csv").read_text().splitlines()) == len(values) + 1
    assert "Search stopped" in (folder / "report.md").read_text()


def test_sweep_stops_at_the_memory_ceiling(recipe_copy, tmp_path):
    runs = tmp_path / "runs"
    # a 2 MiB KV cache: 1024 tokens, 10 sequences of 64 + 32 tokens without preemption
    result = run_mopt(
        "sweep", str(recipe_copy), "--param", "max_num_seqs", "--start", "2", "--max", "64",
        "--runs-dir", str(runs), "--json",
        "--set", "engine.extra_args={kv-cache-memory-bytes: 2097152}",
        "--set", "sweep.confirm_duration_s=0", "--set", "workload.num_requests=60",
        "--set", "sweep.remeasure_rounds=0", "--strategy", "relaunch",
        timeout=1200)
    assert result.returncode == 0, result.stdout + result.stderr
    folder = sweep_dir(runs)
    summary = json.loads((folder / "summary.json").read_text())
    rows = {row["value"]: row for row in summary["steps"]}
    skipped = sorted(v for v, row in rows.items() if row["status"] == "skipped")
    assert skipped and min(skipped) > 10, summary  # the planner refused what cannot fit
    assert all(rows[v]["status"] == "ok" for v in rows if v <= 10)
    assert summary["ceiling"] == min(skipped)
    chosen = json.loads(result.stdout)["chosen"]["value"]
    assert chosen <= 10
    assert load_recipe(recipe_copy).resolved["engine"]["max_num_seqs"] == chosen
    launched = [r for r in step_runs(folder)]
    assert all(r["value"] <= 10 for r in launched)  # no launch spent on a certain failure
