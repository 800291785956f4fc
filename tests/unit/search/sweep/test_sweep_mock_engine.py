"""A whole sweep on the mock engine: real launches (mopt's mock server standing in for vLLM,
its batch capped at 4 like a machine's capacity), real loads, archived steps, the revision
written, the archive sealed and indexed, no process left behind.

Which value is the knee is asserted where it does not depend on the machine's speed: the
same sweep measures each value with the real client against the real mock batching on one
fast-forwarded event loop (``tests/unit/fast_clock.py``), so every figure is what the
injected delays and the capacity make it, however busy the machine is.
"""

from __future__ import annotations

import csv
import io
import json

import psutil
import pytest
import yaml
from rich.console import Console

import model_optimizer.engine.factory as factory
from model_optimizer.cli.sweep import SweepProgress
from model_optimizer.engine.factory import MockEngine
from model_optimizer.events import SweepStep, SweepStepDone
from model_optimizer.load import run_load
from model_optimizer.load.classes import run_slo
from model_optimizer.load.mock_server import MockServer
from model_optimizer.load.steady import summarize_steady
from model_optimizer.runner import effective_slo, effective_workload
from model_optimizer.search.measure import FIGURE_KEYS, Measurement, objective_half_width
from model_optimizer.search.sweep.loop import start_sweep
from tests.unit.cli.test_progress_handlers import RUN_PHASES
from tests.unit.fast_clock import run_fast_forwarded
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
    monkeypatch.setattr(factory, "VllmEngine", lambda: engine)
    return engine


@pytest.mark.slow  # several seconds: real processes (quick tier: not slow)
def test_a_sweep_on_the_mock_engine_launches_archives_and_writes_the_revision(
        tmp_path, tiny_model_dir, mock_engine):
    loaded = mock_recipe(tmp_path, tiny_model_dir, SWEEP)
    events = []
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    outcome = start_sweep(loaded, tmp_path / "runs", output=tmp_path / "next.yaml",
                          on_event=lambda event: events.append(type(event)))
    assert outcome.exit_code == 0 and outcome.written == tmp_path / "next.yaml"
    chosen = outcome.chosen.value
    written = yaml.safe_load((tmp_path / "next.yaml").read_text())
    assert written["engine"]["max_num_seqs"] == chosen and written["revision"] == 2
    assert written["validated"]["by"] == "sweep"
    assert "# a recipe served by the mock engine" in (tmp_path / "next.yaml").read_text()
    archive = outcome.archive
    rows = list(csv.DictReader((archive / "summary.csv").open()))
    qps = {float(r["value"]): float(r["qps"]) for r in rows if r.get("qps")}
    assert {1.0, float(chosen)} <= set(qps) and all(q > 0 for q in qps.values())
    steps = [p for p in (archive / "steps").iterdir() if p.is_dir()]
    assert len(steps) >= 3 and all((s / "engine.log").is_file() for s in steps)
    run = json.loads((steps[0] / "run.json").read_text())
    assert run["argv"][2] == "model_optimizer.load.mock_server"
    assert (archive / "manifest.json").is_file() and (archive / "report.md").is_file()
    summary = json.loads((archive / "summary.json").read_text())
    assert written["validated"]["resolved"] is summary["resolved"] is outcome.resolved
    assert 1 <= written["validated"]["load_average"]["samples"] <= len(steps)
    html = (archive / "report.html").read_text()   # sealed with the archive
    for row in summary["steps"]:
        assert f"<td>{row['step']}</td>" in html
    assert f"chosen {chosen}" in html
    assert {SweepStep, SweepStepDone} <= set(events)
    shown = set(SweepProgress(Console(file=io.StringIO())).handlers()) | RUN_PHASES
    assert set(events) <= shown, set(events) - shown  # every phase has a display
    after = {p.pid for p in psutil.Process().children(recursive=True)
             if p.status() != psutil.STATUS_ZOMBIE}
    assert after <= before  # every mock engine stopped


def fast_forwarded_measure(capacity: int, ttft_s: float, itl_s: float):
    """The sweep's measuring step for a value, as the mock engine serves it, on a
    fast-forwarded clock: the workload as run (concurrency tied to max_num_seqs), the real
    client against the real mock batching (max_num_seqs slots, at most ``capacity`` at once),
    summarized into a run's figures like the runner does."""
    def measure(step, value) -> Measurement:
        recipe = step.resolved
        workload = effective_workload(recipe)
        mock = MockServer(max_num_seqs=recipe["engine"]["max_num_seqs"], capacity=capacity,
                          ttft_s=ttft_s, itl_s=itl_s)

        async def load():
            async with mock.in_this_loop() as server:
                return await run_load(server.url, "mock-model", workload,
                                      [f"prompt {i}" for i in range(64)])

        result = run_fast_forwarded(load)
        metrics = summarize_steady(result.records, result.window_s,
                                   run_slo(effective_slo(recipe)), workload["output_tokens"],
                                   close=result.closed_at)
        half_width = objective_half_width(metrics, "qps")
        return Measurement("ok", [metrics["qps"]], slo_met=bool(metrics.get("slo_met")),
                           run_ids=[f"fast-forwarded-{value}"],
                           figures={**{k: metrics.get(k) for k in FIGURE_KEYS}, "status": "ok"},
                           half_widths=[] if half_width is None else [half_width])
    return measure


def test_a_sweep_finds_the_capacity_knee(tmp_path, tiny_model_dir):
    loaded = mock_recipe(tmp_path, tiny_model_dir, SWEEP)
    outcome = start_sweep(loaded, tmp_path / "runs", output=tmp_path / "next.yaml",
                          measure=fast_forwarded_measure(capacity=4, ttft_s=0.05,
                                                         itl_s=0.005))
    assert outcome.exit_code == 0, outcome.reason
    assert outcome.chosen.value == 4, outcome.reason  # the knee: the capacity
    assert yaml.safe_load((tmp_path / "next.yaml").read_text())["engine"]["max_num_seqs"] == 4
    rows = list(csv.DictReader((outcome.archive / "summary.csv").open()))
    qps = {float(r["value"]): float(r["qps"]) for r in rows if r.get("qps")}
    assert {1.0, 2.0, 4.0} <= set(qps) and qps[4.0] > 2 * qps[1.0]  # batching pays off...
    assert all(q < 1.6 * qps[4.0] for v, q in qps.items() if v > 4)  # ...up to capacity
    request_s = 0.05 + (8 - 1) * 0.005  # TTFT + 7 gaps: the schedule, exactly
    assert all(q == pytest.approx(min(v, 4) / request_s, rel=1e-3) for v, q in qps.items())
