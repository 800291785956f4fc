"""A whole sweep on the mock engine: real launches (mopt's mock server standing in for vLLM,
its batch capped at 4 like a machine's capacity), real loads, archived steps, the knee chosen,
the revision written, the archive sealed and indexed, no process left behind.
"""

from __future__ import annotations

import csv
import io
import json

import psutil
import pytest
import yaml
from rich.console import Console

import model_optimizer.runner as runner
from model_optimizer.cli.sweep import SweepProgress
from model_optimizer.engine.factory import MockEngine
from model_optimizer.sweep.loop import start_sweep
from tests.unit.cli.test_progress_handlers import RUN_PHASES
from tests.unit.mock_engine import mock_recipe

SWEEP = """\
sweep:
  param: max_num_seqs
  start: 1
  max: 16
  plateau_threshold: 0.2
  max_launches: 7
  confirm_duration_s: 0
  strategy: relaunch   # one launch per value (probe-scan: test_probe_loop.py)
"""


@pytest.fixture
def mock_engine(monkeypatch):
    """Every run of this test serves with the mock engine (capacity 4)."""
    engine = MockEngine(ttft_ms=50, itl_ms=5, capacity=4)
    monkeypatch.setattr(runner, "VllmEngine", lambda: engine)
    return engine


def test_a_sweep_finds_the_capacity_knee_and_writes_the_revision(tmp_path, tiny_model_dir,
                                                                  mock_engine):
    loaded = mock_recipe(tmp_path, tiny_model_dir, SWEEP)
    events = []
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    outcome = start_sweep(loaded, tmp_path / "runs", flags={}, output=tmp_path / "next.yaml",
                          on_event=lambda phase, data: events.append(phase))
    assert outcome.exit_code == 0 and outcome.written == tmp_path / "next.yaml"
    chosen = outcome.chosen.value
    assert chosen in (4, 8), outcome.reason  # the knee: capacity 4 (8 only within noise)
    written = yaml.safe_load((tmp_path / "next.yaml").read_text())
    assert written["engine"]["max_num_seqs"] == chosen and written["revision"] == 2
    assert written["validated"]["by"] == "sweep"
    assert "# a recipe served by the mock engine" in (tmp_path / "next.yaml").read_text()
    archive = outcome.archive
    rows = list(csv.DictReader((archive / "summary.csv").open()))
    qps = {float(r["value"]): float(r["qps"]) for r in rows if r.get("qps")}
    assert {1.0, 2.0, 4.0} <= set(qps) and qps[4.0] > 2 * qps[1.0]  # batching pays off...
    assert all(q < 1.6 * qps[4.0] for v, q in qps.items() if v > 4)  # ...up to capacity
    steps = [p for p in (archive / "steps").iterdir() if p.is_dir()]
    assert len(steps) >= 3 and all((s / "engine.log").is_file() for s in steps)
    run = json.loads((steps[0] / "run.json").read_text())
    assert run["argv"][2] == "model_optimizer.load.mock_server"
    assert (archive / "manifest.json").is_file() and (archive / "report.md").is_file()
    assert {"step", "step_done"} <= set(events)
    shown = set(SweepProgress(Console(file=io.StringIO())).handlers()) | RUN_PHASES
    assert set(events) <= shown, set(events) - shown  # every phase has a display
    after = {p.pid for p in psutil.Process().children(recursive=True)
             if p.status() != psutil.STATUS_ZOMBIE}
    assert after <= before  # every mock engine stopped
