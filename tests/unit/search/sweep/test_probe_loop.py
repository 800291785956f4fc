"""A whole probe-scan sweep on the mock engine: two launches, archived levels, the knee."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model_optimizer.engine.factory import MockEngine
from model_optimizer.recipe import load_recipe
from model_optimizer.search.sweep.flags import SweepFlags
from model_optimizer.search.sweep.loop import start_sweep
from model_optimizer.search.sweep.model import Point, SweepConfig
from tests.unit.search.sweep.plan_check import assert_followed_remeasure_plan

ROOT = Path(__file__).resolve().parents[4]


def mock_probe_sweep(tmp_path: Path, engine: MockEngine, resolution: int):
    """A probe-scan sweep of tiny-cpu over 1..8 on ``engine`` (1 s windows): its outcome
    and summary."""
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text((ROOT / "recipes" / "tiny-cpu.yaml").read_text()
                      .replace("../models/tiny-llama", str(ROOT / "models" / "tiny-llama")))
    loaded = load_recipe(recipe, ["workload.duration_s=1", "workload.warmup_requests=2",
                                  "workload.warmup_steady_max_s=null",  # not the test here
                                  "sweep.confirm_duration_s=1", "sweep.remeasure_rounds=1",
                                  f"sweep.resolution={resolution}"])
    outcome = start_sweep(loaded, tmp_path / "runs",
                          flags=SweepFlags(start=1, max=8, strategy="probe-scan"),
                          output=tmp_path / "out.yaml", engine_factory=engine)
    return outcome, json.loads((outcome.archive / "summary.json").read_text())


@pytest.mark.slow  # several seconds: real processes (quick tier: not slow)
def test_probe_scan_sweep_on_the_mock_engine(tmp_path):
    outcome, summary = mock_probe_sweep(tmp_path, MockEngine(ttft_ms=20, itl_ms=5), 4)
    assert summary["strategy"] == "probe-scan" and summary["launches"] == 2
    runs = [json.loads((p / "run.json").read_text())
            for p in (outcome.archive / "steps").iterdir() if p.is_dir()]
    servers = [r for r in runs if r.get("probe_server")]
    levels = [r for r in runs if r.get("probe")]
    confirms = [r for r in runs if r.get("confirm")]
    assert len(servers) == 1 and len(confirms) == 1
    assert "--max-num-seqs" in servers[0]["argv"]
    assert servers[0]["argv"][servers[0]["argv"].index("--max-num-seqs") + 1] == "8"
    assert sorted({r["value"] for r in levels}) == [1, 2, 4, 8]
    assert all(r["workload"]["concurrency"] == r["value"] for r in levels)
    assert len(levels) == len(summary["steps"])
    state = json.loads((outcome.archive / "state.json").read_text())
    remeasured = assert_followed_remeasure_plan(
        [Point.from_dict(p) for p in state["history"]],
        SweepConfig.from_dict(state["config"]).plateau_threshold, rounds=1)
    assert remeasured == [row["value"] for row in summary["steps"]
                          if row["phase"] == "remeasure"]
    assert summary["noise"]["values"] == len(set(remeasured))
    # the budget's clock: the scan server's start (the confirmation's reserve) and every
    # level's seconds, each at least its 1 s window (search/sweep/budget.py)
    assert state["server_start_s"] > 0
    assert len(state["step_seconds"]) == len(state["history"])
    assert all(seconds >= 1 for seconds in state["step_seconds"])
    assert outcome.written and outcome.chosen.value == confirms[0]["value"]
    assert load_recipe(tmp_path / "out.yaml").resolved["engine"]["max_num_seqs"] == \
        outcome.chosen.value
