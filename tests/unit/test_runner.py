"""runner.run_recipe on the mock engine: a real child process, real HTTP load, real telemetry
and a real archive, without vLLM. Outcomes, exit codes, archived files, interrupts, cleanup.
"""

from __future__ import annotations

import json
import os
import signal
import sys

import pytest

from model_optimizer.engine.factory import MockEngine
from model_optimizer.errors import EXIT_OK, EXIT_RUN_FAILED, EXIT_SLO_FAILED, EXIT_START_FAILED
from model_optimizer.events import LoadProgress, Ready
from model_optimizer.load.client import run_load
from model_optimizer.load.mock_server import MockServer
from model_optimizer.recipe import load_recipe_text
from model_optimizer.runner import effective_workload, run_recipe, tied_concurrency
from tests.unit.fast_clock import run_fast_forwarded
from tests.unit.mock_engine import alive, children_pids, mock_recipe
from tests.unit.recipe.conftest import VALID

KV_SMALL = ("ValueError: To serve at least one request with the model's max seq len (4096), "
            "(0.50 GiB KV cache is needed, which is larger than the available KV cache memory "
            "(0.10 GiB)")


def read_json(path):
    return json.loads(path.read_text())


def run_with_events(loaded, runs, engine, **kwargs):
    events, engine_pids = [], set()

    def on_event(event):
        events.append(event.kind)
        if isinstance(event, Ready):
            engine_pids.update(children_pids())
    outcome = run_recipe(loaded, runs, on_event=on_event, engine_factory=engine, **kwargs)
    return outcome, events, engine_pids


def test_a_run_is_measured_archived_and_the_engine_stopped(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("MOPT_TEST_SECRET_TOKEN", "s3cr3t-value")
    loaded = mock_recipe(tmp_path, tiny_model_dir)
    outcome, events, pids = run_with_events(loaded, tmp_path / "runs",
                                            MockEngine(ttft_ms=5, itl_ms=1, engine_core="group"))
    assert outcome.ok and outcome.slo_met and outcome.exit_code == EXIT_OK
    assert events[0] == "archive" and events[-1] == "done"
    assert {"starting", "ready", "load", "stopping"} <= set(events)
    assert len(pids) >= 2 and not alive(pids)  # the server and its engine core are gone
    archive = outcome.archive
    assert read_json(archive / "status.json")["status"] == "ok"
    run = read_json(archive / "run.json")
    assert run["argv"][:3] == [sys.executable, "-m", "model_optimizer.load.mock_server"]
    assert "--max-num-seqs" in run["argv"] and "--served-model-name" in run["argv"]
    assert run["env"] == {"MOPT_TEST_SECRET_TOKEN": "${MOPT_TEST_SECRET_TOKEN}"}
    assert "s3cr3t-value" not in "".join(p.read_text() for p in archive.iterdir() if p.is_file())
    records = [json.loads(line) for line in (archive / "requests.jsonl").read_text().splitlines()]
    assert len(records) == 2 + 24 and sum(r["warmup"] for r in records) == 2
    metrics = read_json(archive / "metrics.json")
    assert metrics["completed"] == 24 and metrics["failed"] == 0 and metrics["qps"] > 0
    assert metrics["ttft_p50_ms"] >= 5 and metrics["total_output_tokens"] == 24 * 8
    assert outcome.workload["concurrency"] == 4  # null concurrency: max_num_seqs
    samples = (archive / "telemetry.jsonl").read_text().splitlines()
    assert samples and "rss_bytes" in json.loads(samples[0])
    assert outcome.telemetry_peaks.get("rss_bytes_max", 0) > 0
    assert "mockrun" in (archive / "report.md").read_text()


def test_a_start_failure_is_classified_and_archived(tmp_path, tiny_model_dir):
    loaded = mock_recipe(tmp_path, tiny_model_dir)
    outcome, events, _ = run_with_events(loaded, tmp_path / "runs",
                                         MockEngine(fail_start=KV_SMALL))
    assert outcome.status == "failed:kv_cache_too_small"
    assert outcome.exit_code == EXIT_START_FAILED and not outcome.ok
    assert "start_failed" in events and "load" not in events
    assert read_json(outcome.archive / "failure.json")["class"] == "kv_cache_too_small"
    assert read_json(outcome.archive / "status.json")["status"] == "failed:kv_cache_too_small"
    assert KV_SMALL in (outcome.archive / "engine.log").read_text()


def test_an_engine_that_dies_during_the_load(tmp_path, tiny_model_dir):
    loaded = mock_recipe(tmp_path, tiny_model_dir)
    outcome, _, pids = run_with_events(loaded, tmp_path / "runs", MockEngine(die_after=6))
    assert outcome.status == "failed:engine_died" and outcome.exit_code == EXIT_RUN_FAILED
    assert outcome.metrics["failed"] > 0 and not alive(pids)
    assert read_json(outcome.archive / "failure.json")["class"] == "engine_died"


def test_a_missed_slo_is_exit_4(tmp_path, tiny_model_dir):
    loaded = mock_recipe(tmp_path, tiny_model_dir, "slo:\n  ttft_p50_ms: 1\n")
    outcome, _, _ = run_with_events(loaded, tmp_path / "runs", MockEngine(ttft_ms=30))
    assert outcome.ok and not outcome.slo_met and outcome.exit_code == EXIT_SLO_FAILED
    assert outcome.metrics["slo_violations"]


def test_ctrl_c_during_the_load_archives_interrupted_and_stops_the_engine(tmp_path,
                                                                          tiny_model_dir):
    loaded = mock_recipe(tmp_path, tiny_model_dir, overrides=["workload.num_requests=2000"])
    pids: set[int] = set()
    seen = []

    def on_event(event):
        seen.append(event.kind)
        if isinstance(event, Ready):
            pids.update(children_pids())
        if isinstance(event, LoadProgress) and event.done >= 1 and "sent" not in seen:
            seen.append("sent")
            os.kill(os.getpid(), signal.SIGINT)  # a real Ctrl-C
    # a shell's background job inherits SIGINT ignored: install Python's own handler here
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_recipe(loaded, tmp_path / "runs", on_event=on_event,
                       engine_factory=MockEngine(ttft_ms=2, itl_ms=2))
    finally:
        signal.signal(signal.SIGINT, previous)
    archive = next(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    status = read_json(archive / "status.json")
    assert status["status"] == "interrupted" and status["phase"] == "finished"
    assert "done" in seen and pids and not alive(pids)
    assert (archive / "metrics.json").is_file()


def test_workload_override_and_tied_concurrency():
    recipe = load_recipe_text(VALID, overrides=["engine.max_num_seqs=6",
                                                "workload.num_requests=5"]).spec
    assert effective_workload(recipe)["concurrency"] == 6
    assert effective_workload(recipe, {"concurrency": 2})["concurrency"] == 2
    unset = load_recipe_text(VALID, overrides=["engine.max_num_seqs=null"]).resolved
    assert effective_workload(unset)["concurrency"] == 1


def test_an_open_loop_without_a_concurrency_is_not_capped_at_one_in_flight():
    """Issue 37: `bench --request-rate 20` without --concurrency ran one request in flight
    (5.2 req/s measured); an open loop with a null concurrency is uncapped."""
    recipe = load_recipe_text(VALID, overrides=["engine.max_num_seqs=null",
                                                "workload.request_rate=20",
                                                "workload.num_requests=40",
                                                "workload.warmup_requests=0",
                                                "workload.output_tokens=4"]).spec
    workload = effective_workload(recipe)
    assert workload["concurrency"] is None and not tied_concurrency(recipe)
    assert effective_workload(recipe, {"request_rate": "inf"})["concurrency"] == 1

    async def main():
        async with MockServer(ttft_s=0.25).in_this_loop() as server:
            return await run_load(server.url, "mock-model", workload, ["a b c"])

    result = run_fast_forwarded(main)
    qps = len(result.records) / result.window_s
    assert all(r.ok for r in result.records)
    assert 12 < qps < 30  # capped at one in flight it is below 4 (0.25 s a request)


def test_while_serving_runs_against_the_live_server_before_it_stops(tmp_path, tiny_model_dir):
    import requests

    loaded = mock_recipe(tmp_path, tiny_model_dir)
    seen = []

    def while_serving(base_url):
        [folder] = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
        lines = (folder / "requests.jsonl").read_text().splitlines()
        seen.append((base_url, requests.get(f"{base_url}/health", timeout=5).status_code,
                     len(lines)))

    outcome, events, pids = run_with_events(loaded, tmp_path / "runs",
                                            MockEngine(ttft_ms=5, itl_ms=1),
                                            while_serving=while_serving)
    assert outcome.ok and len(seen) == 1
    base_url, health, records = seen[0]
    assert base_url.startswith("http://127.0.0.1:") and health == 200
    assert records == 2 + 24                       # after the whole load
    assert events.index("stopping") > events.index("load") and not alive(pids)
