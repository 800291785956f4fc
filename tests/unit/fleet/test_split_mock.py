"""`mopt split FLEET --replicas` orchestrated for real on the mock engine: the single server,
the fleet and the replicas (both with the real router) in rotating rounds, each window a
nested run, the verdict archived; a window that fails and a Ctrl-C end the experiment with
everything archived and no process left.

The mock's latencies are scripted per server: one server answers every first token in 1 s,
the fleet's short instance in 0.1 s and its long one in 2.5 s; the replicas serve the
single server's name, so they answer in 1 s too."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

import model_optimizer.engine.factory as factory
from model_optimizer.cli.main import app
from model_optimizer.engine.factory import EngineCommand, MockEngine
from model_optimizer.errors import EXIT_START_FAILED
from model_optimizer.fleet import load_fleet
from model_optimizer.fleet.launch import ROUTER_BIN_ENV, router_executable
from model_optimizer.fleet.split import FLEET_ARM, REPLICAS_ARM, SINGLE_ARM, SplitWindow
from model_optimizer.usecase.split import split
from model_optimizer.usecase.split_verdict import UNRESOLVED, judge_split
from tests.unit.mock_engine import alive, children_pids

from .conftest import cpu_fleet

pytestmark = pytest.mark.slow  # whole runs: launches, warm-ups, the router, a child mopt

SINGLE_TTFT, SHORT_TTFT, LONG_TTFT = 1000.0, 100.0, 2500.0


@dataclass(frozen=True)
class ScriptedMock(MockEngine):
    """The mock with each server's first-token time set by the name it serves."""

    ttft_by_name: tuple[tuple[str, float], ...] = ()

    def command(self, recipe, base_dir, port) -> EngineCommand:
        """The mock's command with this server's own first-token time."""
        command = super().command(recipe, base_dir, port)
        argv = list(command.argv)
        served = argv[argv.index("--served-model-name") + 1]
        argv[argv.index("--ttft-ms") + 1] = str(dict(self.ttft_by_name).get(served,
                                                                            self.ttft_ms))
        return EngineCommand(argv, command.env)


SCRIPTED = ScriptedMock(itl_ms=1, ttft_by_name=(("m", SINGLE_TTFT), ("m-short", SHORT_TTFT),
                                                ("m-long", LONG_TTFT)))


def mock_fleet(tmp_path: Path, tiny_model_dir: Path, requests: int = 16) -> Path:
    """Short requests by model name ('chat') to one instance, the rest to the fallback; the
    short class held to 900 ms, which one server (1 s) misses."""
    doc = cpu_fleet()
    for name in ("short", "long"):
        doc["instances"][name]["model"]["path"] = str(tiny_model_dir)
    doc["router"]["routes"] = [{"class": "short", "to": "short", "model": "chat"},
                               {"class": "long", "to": "long"}]
    doc["workload"]["mix"]["long"]["prompt_tokens"] = {"dist": "uniform", "min": 100,
                                                       "max": 200}
    doc["workload"].update(num_requests=requests, warmup_requests=2, concurrency=4)
    doc["slo"] = {"ttft_p99_ms": 10000, "classes": {"short": {"ttft_p99_ms": 900}}}
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def windows_of(archive: Path) -> list[SplitWindow]:
    return [SplitWindow.from_dict(json.loads(line))
            for line in (archive / "windows.jsonl").read_text().splitlines()]


def sealed_steps(archive: Path) -> list[dict]:
    steps = sorted((archive / "steps").iterdir())
    assert all((step / "manifest.json").is_file() for step in steps)
    return [json.loads((step / "status.json").read_text()) for step in steps]


def test_split_runs_three_arms_in_rotating_rounds_and_archives_every_window(
        tmp_path, tiny_model_dir, monkeypatch):
    try:
        router_executable()
    except Exception as exc:  # noqa: BLE001 - reported as the skip/fail reason
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))
    fleet = mock_fleet(tmp_path, tiny_model_dir, requests=12)
    before = children_pids()
    monkeypatch.setattr(factory, "VllmEngine", lambda: SCRIPTED)
    result = CliRunner().invoke(app, ["split", str(fleet), "--rounds", "2", "--replicas",
                                      "--runs-dir", str(tmp_path / "runs")],
                                env={"COLUMNS": "200"})
    assert not alive(children_pids() - before)  # every engine and router stopped
    archive = next((tmp_path / "runs").glob("*-split-*"))
    windows = windows_of(archive)
    assert [(w.round, w.arm, w.status, w.routing_problems) for w in windows] == [
        (1, SINGLE_ARM, "ok", ()), (1, FLEET_ARM, "ok", ()), (1, REPLICAS_ARM, "ok", ()),
        (2, FLEET_ARM, "ok", ()), (2, REPLICAS_ARM, "ok", ()), (2, SINGLE_ARM, "ok", ())
    ], result.output
    # each arm served as scripted: one server answers every class in 1 s (and misses the
    # short class's 900 ms), the fleet's long instance in 2.5 s plus the router's time
    for window in windows:
        short, long_ = window.classes["short"], window.classes["long"]
        if window.arm in (SINGLE_ARM, REPLICAS_ARM):  # both answer every class in 1 s
            assert SINGLE_TTFT <= short.ttft_p50_ms < SINGLE_TTFT * 1.5
            assert short.slo_met is False
        else:
            assert long_.ttft_p50_ms >= LONG_TTFT
    # the verdict archived is the rule's on the windows archived; what it says depends on
    # the router's own time on this machine (100 ms became 0.5-5 s under load), so the
    # decisions themselves are tested on recorded figures (test_split_verdict.py)
    verdict = json.loads((archive / "verdict.json").read_text())
    assert verdict == {**judge_split(windows).to_dict(), "windows": 6}
    assert [(c["arm"], c["base"], c["pairs"]) for c in verdict["comparisons"]] == [
        (REPLICAS_ARM, SINGLE_ARM, 2), (FLEET_ARM, REPLICAS_ARM, 2)]
    assert all(c["words"] in verdict["words"] for c in verdict["comparisons"])
    short = next(c for c in verdict["classes"] if c["class"] == "short")
    assert short["single_slo_met"] is False
    assert result.exit_code == (1 if verdict["verdict"] == UNRESOLVED else 0), result.output
    assert [s["status"] for s in sealed_steps(archive)] == ["ok"] * 6
    assert_replicas_balanced(archive, windows)
    status = json.loads((archive / "status.json").read_text())
    assert (status["status"], status["kind"]) == ("ok", "fleet-split")
    assert (archive / "recipe.given.yaml").read_text() == fleet.read_text()
    assert yaml.safe_load((archive / "single.yaml").read_text())["engine"]["max_num_seqs"] == 8
    report = (archive / "report.md").read_text()
    assert f"**Verdict: {verdict['words']}**" in report
    assert (archive / "manifest.json").is_file()
    assert verdict["words"] in result.output  # one line at any width
    words = " ".join(result.output.split())  # a table title may wrap
    assert "fleet / single - 1, paired by round" in words
    assert "replicas / single - 1" in words and "fleet / replicas - 1" in words


def assert_replicas_balanced(archive: Path, windows: list[SplitWindow]) -> None:
    """The replicas: two copies of the single server (4 sequences each of its 8), each on
    an instance's core, one least-busy group with no class rule, each serving some of the
    requests and together all of them."""
    derived = yaml.safe_load((archive / "replicas.yaml").read_text())
    assert {name: (r["from_instance"], r["cores"], r["max_num_seqs"], r["kv_cache_gib"])
            for name, r in derived["instances"].items()} == {
        "replica-1": ("short", [0], 4, 1), "replica-2": ("long", [1], 4, 1)}
    for window in (w for w in windows if w.arm == REPLICAS_ARM):
        step = archive / "steps" / window.run_id
        config = yaml.safe_load((step / "router.yaml").read_text())
        assert config["router_settings"]["routing_strategy"] == "least-busy"
        assert [d["model_name"] for d in config["model_list"]] == ["m", "m"]
        served = json.loads((step / "metrics.json").read_text())["instances"]
        assert set(served) == {"replica-1", "replica-2"}
        assert all(item["served"] > 0 for item in served.values()), served
        assert sum(item["served"] for item in served.values()) == 12 + 2  # warm-up too


def no_router_needed(monkeypatch) -> None:
    """The router is never started by these tests (they end in round 1's single window)."""
    monkeypatch.setenv(ROUTER_BIN_ENV, sys.executable)


def test_ctrl_c_after_a_window_seals_the_experiment_and_leaves_no_process(
        tmp_path, tiny_model_dir, monkeypatch):
    no_router_needed(monkeypatch)
    fleet = load_fleet(mock_fleet(tmp_path, tiny_model_dir, requests=8))
    before = children_pids()

    def interrupt(window: SplitWindow) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        split(fleet, rounds=2, runs_base=tmp_path / "runs", on_window=interrupt,
              engine_factory=MockEngine(ttft_ms=5, itl_ms=1))
    assert not alive(children_pids() - before)
    archive = next((tmp_path / "runs").glob("*-split-*"))
    status = json.loads((archive / "status.json").read_text())
    assert status["status"] == "interrupted" and status["phase"] == "finished"
    assert [(w.round, w.arm, w.status) for w in windows_of(archive)] == [(1, SINGLE_ARM, "ok")]
    verdict = json.loads((archive / "verdict.json").read_text())
    assert verdict["verdict"] == UNRESOLVED and verdict["windows"] == 1
    assert [s["status"] for s in sealed_steps(archive)] == ["ok"]
    assert (archive / "manifest.json").is_file()


def test_a_server_that_does_not_start_ends_the_experiment_with_exit_3(
        tmp_path, tiny_model_dir, monkeypatch):
    no_router_needed(monkeypatch)
    before = children_pids()
    outcome = split(mock_fleet(tmp_path, tiny_model_dir), rounds=3,
                    runs_base=tmp_path / "runs",
                    engine_factory=MockEngine(fail_start="torch.OutOfMemoryError: CUDA out "
                                                         "of memory"))
    assert not alive(children_pids() - before)
    assert outcome.exit_code == EXIT_START_FAILED
    assert [w.arm for w in outcome.run.windows] == [SINGLE_ARM]  # stopped there
    assert outcome.run.status.startswith("failed:")
    assert outcome.verdict.verdict == UNRESOLVED
    status = json.loads((outcome.run.archive / "status.json").read_text())
    assert status["status"] == outcome.run.status and status["failure"]["class"]
    assert outcome.to_dict()["failed_window"]["status"] == outcome.run.status


def test_sigkill_of_mopt_split_leaves_no_server(tmp_path, tiny_model_dir, monkeypatch):
    from model_optimizer.reaper import server_processes
    from tests.unit.mock_mopt import start_mock_mopt

    no_router_needed(monkeypatch)  # killed in round 1's single window, before any router
    fleet = mock_fleet(tmp_path, tiny_model_dir, requests=2000)
    runs = tmp_path / "runs"
    proc = start_mock_mopt("split", str(fleet), "--runs-dir", str(runs),
                           log=tmp_path / "mopt.log", engine={"ttft_ms": 20, "itl_ms": 5})
    deadline = time.monotonic() + 120
    window = None
    while time.monotonic() < deadline and window is None:
        assert proc.poll() is None, (tmp_path / "mopt.log").read_text()
        for log in runs.glob("*-split-*/steps/*/requests.jsonl"):
            if len(log.read_text().splitlines()) >= 5:
                window = log.parent
        time.sleep(0.2)
    assert window is not None, "the first window's load did not start"
    assert server_processes(window)  # the single server, carrying its window's tag
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    gone_by = time.monotonic() + 20
    while server_processes(window) and time.monotonic() < gone_by:
        time.sleep(0.2)
    assert server_processes(window) == []
