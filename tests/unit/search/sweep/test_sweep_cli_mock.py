"""`mopt sweep` end to end on the command line with the mock engine (batch capped at 4):
a plateau found, Ctrl-C in a real process after its first step, ``--resume`` (in this
process: no second interpreter start) that reruns no finished step, the
revision written and the archive's outputs. Real processes and HTTP, no vLLM: the memory
ceiling, which needs vLLM's KV cache, stays in tests/integration/test_sweep.py."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from model_optimizer.recipe import load_recipe
from model_optimizer.search.sweep.strategy import STOP_RULES, Point, SweepConfig, choose
from tests.unit.mock_mopt import invoke_mock_mopt, start_mock_mopt

ROOT = Path(__file__).resolve().parents[4]
TINY_RECIPE = ROOT / "recipes" / "tiny-cpu.yaml"


def step_runs(folder: Path) -> list[dict]:
    """run.json of every step archive (measurements and confirmations)."""
    return [json.loads((p / "run.json").read_text()) | {
        "status": json.loads((p / "status.json").read_text())["status"]}
        for p in sorted((folder / "steps").iterdir())]


def wait_for_steps(runs: Path, count: int, proc, timeout: float = 300) -> Path:
    """The sweep folder once its state records ``count`` finished steps."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "mopt sweep ended early"
        folders = [p for p in runs.iterdir() if p.is_dir()] if runs.exists() else []
        if folders and (folders[0] / "state.json").exists():
            state = json.loads((folders[0] / "state.json").read_text())
            if len(state["history"]) >= count:
                return folders[0]
        time.sleep(0.2)
    raise AssertionError("the sweep did not reach the step in time")


@pytest.mark.slow  # several seconds: real processes (quick tier: not slow)
def test_sweep_plateau_interrupt_and_resume(tmp_path, tiny_model_dir):
    recipe = tmp_path / "tiny-cpu.yaml"
    recipe.write_text(TINY_RECIPE.read_text().replace("../models/tiny-llama",
                                                      str(tiny_model_dir)))
    runs, original = tmp_path / "runs", recipe.read_text()
    args = ["sweep", str(recipe), "--param", "max_num_seqs", "--start", "1",
            "--growth", "4", "--max", "16", "--runs-dir", str(runs),
            "--set", "sweep.resolution=8", "--set", "sweep.confirm_duration_s=2",
            "--set", "workload.num_requests=32", "--set", "workload.duration_s=null",
            "--set", "workload.output_tokens=8", "--set", "sweep.remeasure_rounds=0",
            "--set", "workload.warmup_steady_max_s=null",
            "--strategy", "relaunch"]
    proc = start_mock_mopt(*args, log=tmp_path / "first.log")
    try:
        folder = wait_for_steps(runs, 1, proc)
        proc.send_signal(2)  # SIGINT, as Ctrl-C in a terminal
        assert proc.wait(60) == 130, (tmp_path / "first.log").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "--resume" in (tmp_path / "first.log").read_text()
    before = json.loads((folder / "state.json").read_text())["history"]
    assert json.loads((folder / "status.json").read_text())["status"] == "interrupted"
    assert load_recipe(recipe).resolved["revision"] == 1  # nothing written yet

    result = invoke_mock_mopt("sweep", "--resume", str(folder), "--json")
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
    assert all(r["argv"][2] == "model_optimizer.load.mock_server" for r in measured)

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

    written = load_recipe(recipe)  # validates
    assert written.resolved["revision"] == 2
    assert written.resolved["engine"]["max_num_seqs"] == chosen.value
    validated = written.resolved["validated"]
    assert validated["run_id"] == folder.name and validated["by"] == "sweep"
    # remeasure_rounds=0: nothing measured twice, so the noise is unknown: written, not resolved
    assert outcome["resolved"] is False and summary["resolved"] is False
    assert validated["resolved"] is False
    load = validated["load_average"]  # sampled at every launch, the confirmation's too
    assert load["samples"] >= len(values) + 1 and load["min"] <= load["median"] <= load["max"]
    confirmation = summary["confirmations"][-1]
    assert confirmation["ok"] and confirmation["value"] == chosen.value
    assert validated["metrics"]["qps"] == pytest.approx(confirmation["figures"]["qps"])
    assert (folder / "recipe.given.yaml").read_text() == original  # the previous revision
    assert (folder / "plot.png").stat().st_size > 5000
    assert len((folder / "summary.csv").read_text().splitlines()) == len(values) + 1
    assert "Search stopped" in (folder / "report.md").read_text()
