"""`mopt apply FLEET` orchestrated for real on the mock engine: two instances, the real
router (LiteLLM's proxy from .venv-router), the workload through the router's one URL, the
per-instance counts read from each instance's /metrics, everything stopped and archived."""

from __future__ import annotations

import json
import os
import signal
import time

import psutil
import pytest
import yaml

from model_optimizer.engine.factory import MockEngine
from model_optimizer.errors import EXIT_OK, EXIT_RUN_FAILED
from model_optimizer.events import LoadProgress, Ready
from model_optimizer.fleet import load_fleet
from model_optimizer.fleet.launch import router_executable
from model_optimizer.fleet.run import run_fleet
from tests.unit.mock_engine import alive, children_pids

from .conftest import cpu_fleet

pytestmark = pytest.mark.slow  # the router takes ~10 s to start


@pytest.fixture(autouse=True)
def router_installed():
    """The router venv examples/setup-router.sh builds: missing in CI is a failure."""
    try:
        router_executable()
    except Exception as exc:  # noqa: BLE001 - reported as the skip/fail reason
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(str(exc))
        pytest.skip(str(exc))


def mock_fleet(tmp_path, tiny_model_dir, requests: int = 24):
    """Short requests by model name ('chat') to one instance, the rest to the fallback."""
    doc = cpu_fleet()
    for name in ("short", "long"):
        doc["instances"][name]["model"]["path"] = str(tiny_model_dir)
    doc["router"]["routes"] = [{"class": "short", "to": "short", "model": "chat"},
                               {"class": "long", "to": "long"}]
    doc["workload"]["mix"]["long"]["prompt_tokens"] = {"dist": "uniform", "min": 100,
                                                       "max": 200}
    doc["workload"].update(num_requests=requests, warmup_requests=2, concurrency=4)
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return load_fleet(path)


def router_process() -> psutil.Process:
    return next(p for p in psutil.Process().children(recursive=True)
                if "litellm" in " ".join(p.cmdline()))


def bench_the_router(tmp_path, tiny_model_dir, monkeypatch, benched: list):
    """On Ready: `mopt bench --url` against the running router (before the fleet's load and
    its counters), as a team would bench a router it runs."""
    from typer.testing import CliRunner

    from model_optimizer.cli.main import app

    def on_event(event) -> None:
        if not isinstance(event, Ready):
            return
        proc = router_process()
        monkeypatch.setenv("ROUTER_KEY", proc.environ()["LITELLM_MASTER_KEY"])
        port = proc.cmdline()[proc.cmdline().index("--port") + 1]
        benched.append(CliRunner().invoke(app, [
            "bench", "--url", f"http://127.0.0.1:{port}", "--model", "chat", "--tokenizer",
            str(tiny_model_dir), "--api-key-env", "ROUTER_KEY", "--prompt-tokens", "16",
            "--output-tokens", "4", "--num-requests", "6", "--warmup", "0", "--json",
            "--runs-dir", str(tmp_path / "bench-runs")]))
    return on_event


def test_a_fleet_run_routes_as_the_rules_say_and_archives_everything(tmp_path, tiny_model_dir,
                                                                     monkeypatch):
    fleet = mock_fleet(tmp_path, tiny_model_dir)
    before = children_pids()
    benched: list = []
    outcome = run_fleet(fleet, tmp_path / "runs", engine_factory=MockEngine(ttft_ms=2, itl_ms=1),
                        on_event=bench_the_router(tmp_path, tiny_model_dir, monkeypatch, benched))
    assert benched[0].exit_code == 0, benched[0].output
    assert json.loads(benched[0].stdout)["metrics"]["completed"] == 6  # bench --url: the router
    assert outcome.exit_code == EXIT_OK, (outcome.status, outcome.failure,
                                         outcome.metrics.get("slo_violations"))
    metrics = outcome.metrics
    classes = metrics["classes"]
    instances = metrics["instances"]
    # every request of a class landed on the instance the rules name, counted by the instance
    assert instances["short"]["served"] == instances["short"]["sent_by_rules"] > 0
    assert instances["long"]["served"] == instances["long"]["sent_by_rules"] > 0
    measured = classes["short"]["completed"] + classes["long"]["completed"]
    assert measured == 24
    assert instances["short"]["served"] + instances["long"]["served"] == 24 + 2  # + warm-up
    assert instances["short"]["requests"] == classes["short"]["requests"]
    assert metrics["routing"] == {"problems": []}
    files = {p.name for p in outcome.archive.iterdir()}
    assert {"engine.short.log", "engine.long.log", "router.log", "router.yaml",
            "instance.short.yaml", "instance.long.yaml", "requests.jsonl", "metrics.json",
            "report.md", "manifest.json"} <= files
    config = yaml.safe_load((outcome.archive / "router.yaml").read_text())
    assert [d["model_name"] for d in config["model_list"]] == ["chat", fleet.router.model]
    assert (outcome.archive / "recipe.given.yaml").read_text() == fleet.path.read_text()
    run = json.loads((outcome.archive / "run.json").read_text())
    assert run["env"]["LITELLM_MASTER_KEY"] == "***redacted***"
    assert "## Per instance" in (outcome.archive / "report.md").read_text()
    assert not alive(children_pids() - before)  # every engine and the router stopped


def test_a_router_that_dies_mid_run_is_reported_and_nothing_is_lost(tmp_path, tiny_model_dir):
    fleet = mock_fleet(tmp_path, tiny_model_dir, requests=400)
    before = children_pids()
    killed = []

    def kill_router(event) -> None:
        if isinstance(event, LoadProgress) and not killed and event.done >= 10:
            for proc in psutil.Process().children(recursive=True):
                if "litellm" in " ".join(proc.cmdline()):
                    proc.send_signal(signal.SIGKILL)
                    killed.append(proc.pid)

    outcome = run_fleet(fleet, tmp_path / "runs", on_event=kill_router,
                        engine_factory=MockEngine(ttft_ms=20, itl_ms=5))
    assert killed
    assert outcome.failure is not None and outcome.failure.kind == "router_died"
    assert outcome.status == "failed:router_died" and outcome.exit_code == EXIT_RUN_FAILED
    failure = json.loads((outcome.archive / "failure.json").read_text())
    assert failure["class"] == "router_died"
    lines = (outcome.archive / "requests.jsonl").read_text().splitlines()
    assert len(lines) >= 10  # what was measured before the death is kept
    assert json.loads((outcome.archive / "metrics.json").read_text())["requests"] >= 8
    assert (outcome.archive / "manifest.json").is_file()
    assert not alive(children_pids() - before)


def test_sigkill_of_mopt_leaves_no_engine_and_no_router(tmp_path, tiny_model_dir):
    from model_optimizer.reaper import server_processes
    from tests.unit.mock_mopt import start_mock_mopt

    fleet = mock_fleet(tmp_path, tiny_model_dir, requests=2000)
    runs = tmp_path / "runs"
    proc = start_mock_mopt("apply", str(fleet.path), "--runs-dir", str(runs),
                           log=tmp_path / "mopt.log", engine={"ttft_ms": 20, "itl_ms": 5})
    deadline = time.monotonic() + 120
    archive = None
    while time.monotonic() < deadline and archive is None:
        assert proc.poll() is None, (tmp_path / "mopt.log").read_text()
        for log in runs.glob("*/requests.jsonl"):
            if len(log.read_text().splitlines()) >= 5:
                archive = log.parent
        time.sleep(0.2)
    assert archive is not None, "the load did not start"
    owned = server_processes(archive)
    assert len(owned) >= 3  # two engines and the router, each carrying the archive's tag
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    gone_by = time.monotonic() + 20
    while server_processes(archive) and time.monotonic() < gone_by:
        time.sleep(0.2)
    assert server_processes(archive) == []
