"""`mopt apply` and `mopt bench` against the real vLLM CPU server and the tiny local model."""

from __future__ import annotations

import json
import os
import signal

import pytest
import yaml

from model_optimizer.load.client import STOP_POLL_INTERVAL_S

from .conftest import (
    TINY_RECIPE,
    exit_code,
    only_archive,
    read_jsonl,
    run_mopt,
    start_mopt,
    wait_for_measured_requests,
)

pytestmark = pytest.mark.integration

ARCHIVE_FILES = {"status.json", "run.json", "recipe.given.yaml", "recipe.resolved.yaml",
                 "engine.log", "requests.jsonl", "telemetry.jsonl", "metrics.json", "report.md"}


@pytest.mark.quiet  # its warm-up must stream every round: beside two engines it went 3 s dry
def test_apply_tiny_cpu_end_to_end(tiny_model, tmp_path):
    runs = tmp_path / "runs"
    result = run_mopt("apply", str(TINY_RECIPE), "--runs-dir", str(runs), "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout)
    archive = only_archive(runs)
    assert summary["archive"] == str(archive) and summary["status"] == "ok"
    assert {p.name for p in archive.iterdir()} >= ARCHIVE_FILES
    status = json.loads((archive / "status.json").read_text())
    assert status["status"] == "ok" and status["slo_met"] is True
    assert (archive / "recipe.given.yaml").read_text() == TINY_RECIPE.read_text()
    resolved = yaml.safe_load((archive / "recipe.resolved.yaml").read_text())
    assert resolved["engine"]["gpu_memory_utilization"] == 0.9  # defaults filled in
    run = json.loads((archive / "run.json").read_text())
    assert run["argv"][1:3] == ["-m", "vllm.entrypoints.openai.api_server"]
    assert run["versions"]["vllm"] and run["hardware"]["cpu_model"]
    assert "Application startup complete" in (archive / "engine.log").read_text()

    workload = resolved["workload"]
    records = read_jsonl(archive / "requests.jsonl")
    measured = [r for r in records if not r["warmup"]]
    # the warm-up requests, then the steady warm-up (rounds of 3 s, at most 30 s)
    assert len(records) - len(measured) > workload["warmup_requests"]
    assert workload["num_requests"] is None and workload["duration_s"] == 20  # a time window
    first_sent = min(r["sent_at"] for r in measured)
    assert max(r["sent_at"] for r in measured) - first_sent <= workload["duration_s"]
    for record in measured:
        assert record["ok"], record
        assert record["output_tokens"] == workload["output_tokens"]
        assert record["prompt_tokens"] == workload["prompt_tokens"]
        assert 0 < record["ttft_s"] <= record["e2e_s"]

    metrics = json.loads((archive / "metrics.json").read_text())
    assert metrics["completed"] == len(measured) and metrics["failed"] == 0
    # steady state: completions between the end of the first wave and the 20 s close
    steady = metrics["steady"]
    assert steady["end"] - first_sent == pytest.approx(workload["duration_s"], abs=0.5)
    first_wave = [r for r in measured if r["sent_at"] < min(r["finished_at"] for r in measured)]
    assert len(first_wave) == resolved["engine"]["max_num_seqs"]  # concurrency tied to it
    assert steady["start"] == max(r["finished_at"] for r in first_wave)
    inside = [r for r in measured if steady["start"] < r["finished_at"] <= steady["end"]]
    assert steady["completed"] == len(inside) >= 50
    assert metrics["qps"] * steady["window_s"] == pytest.approx(len(inside), rel=1e-6)
    qps = metrics["intervals"]["qps"]
    assert qps["low"] < metrics["qps"] < qps["high"] and qps["half_width"] > 0
    ttft = metrics["intervals"]["ttft_p50_ms"]
    assert ttft["low"] <= metrics["ttft_p50_ms"] <= ttft["high"]
    assert metrics["output_tok_s"] == pytest.approx(metrics["qps"] * workload["output_tokens"],
                                                    rel=1e-6)
    assert metrics["ttft_p50_ms"] <= metrics["e2e_p50_ms"]
    # /metrics was read live: vLLM's generated-token counter grew during the load, by no more
    # than the client received. (The running gauge, sampled at 1 Hz, may read 0 throughout on a
    # busy machine: vLLM's own log then says "Running: 1 reqs" with 8 in flight.)
    generated = metrics["telemetry_peaks"]["generation_tokens"]
    assert 0 < generated <= sum(r["output_tokens"] for r in records)
    assert metrics["telemetry_peaks"]["rss_bytes_max"] > 100 * 2**20
    assert len(read_jsonl(archive / "telemetry.jsonl")) >= 1
    report = (archive / "report.md").read_text()
    assert "SLOs: met" in report and f"{metrics['qps']:,.2f} ± " in report
    assert "steady state:" in report
    _assert_checked_against_the_server(metrics, measured, workload)


def _assert_checked_against_the_server(metrics: dict, measured: list, workload: dict) -> None:
    """The window's checks on the real engine: vLLM's histograms hold exactly the measured
    requests (the scrape came after the warm-up drained), the engine's held time is at most
    the client's in-flight time, the warm-up was judged, and no TPOT is 0."""
    warmup = metrics["warmup"]
    assert warmup["verdict"] in ("steady", "not steady")
    # decided on the client's poll (every 0.1 s), which a busy loop delays by its lag
    late_s = STOP_POLL_INTERVAL_S + (warmup["loop_lag_max_s"] or 0) + 0.02
    assert 9 <= warmup["seconds"] <= workload["warmup_steady_max_s"] + late_s, warmup
    assert len(warmup["round_tok_s"]) >= 3 and min(warmup["round_tok_s"]) > 0
    check = metrics["server_check"]
    assert check["server_requests"] == len(measured) == check["client_requests"]
    for name in ("ttft", "tpot", "e2e"):
        row = check["figures"][name]
        assert row["server_mean_ms"] > 0 and row["verdict"] in (
            "agree", "client saw more", "server reports more")
    # the client times from before the request leaves to after the last chunk is read
    assert check["figures"]["e2e"]["client_mean_ms"] >= check["figures"]["e2e"]["server_mean_ms"]
    feed = metrics["feed"]
    assert 0 <= feed["starved_share"] <= 1 and feed["client_bound"] == (
        feed["starved_share"] > 0.10)
    assert metrics["load_average"]["before"] is not None
    assert all((r["e2e_s"] - r["ttft_s"]) > 0 or r["content_reads"] == 1 for r in measured)
    if metrics["tpot_p50_ms"] is not None:
        assert metrics["tpot_p50_ms"] > 0 and metrics["tpot_note"] is None


def test_kv_cache_too_small_fails_at_start(tiny_model, tmp_path):
    runs = tmp_path / "runs"
    result = run_mopt(
        "apply", str(TINY_RECIPE), "--runs-dir", str(runs),
        "--set", "engine.max_model_len=1000000",
        "--set", "engine.env={VLLM_CPU_KVCACHE_SPACE: '1', VLLM_ALLOW_LONG_MAX_MODEL_LEN: '1'}")
    assert result.returncode == 3, result.stdout + result.stderr
    assert "kv_cache_too_small" in result.stderr
    archive = only_archive(runs)
    status = json.loads((archive / "status.json").read_text())
    assert status["status"] == "failed:kv_cache_too_small"
    failure = json.loads((archive / "failure.json").read_text())
    assert any("To serve at least one request" in line for line in failure["evidence"])
    assert "max_model_len" in failure["hint"]
    assert "To serve at least one request" in (archive / "engine.log").read_text()


def test_engine_killed_during_load(tiny_model, tmp_path):
    runs = tmp_path / "runs"
    proc = start_mopt("apply", str(TINY_RECIPE), "--runs-dir", str(runs),
                      "--set", "workload.num_requests=100000", "--set", "workload.duration_s=300",
                      "--set", "workload.warmup_steady_max_s=null",
                      log=tmp_path / "mopt.log")
    try:
        archive = wait_for_measured_requests(runs, 10, proc)
        server_pid = json.loads((archive / "status.json").read_text())["server_pid"]
        os.kill(server_pid, signal.SIGKILL)
        assert exit_code(proc, tmp_path / "mopt.log", 60) == 5
    finally:
        if proc.poll() is None:
            proc.kill()
    status = json.loads((archive / "status.json").read_text())
    assert status["status"] == "failed:engine_died"
    assert "signal 9" in status["failure"]["hint"]
    metrics = json.loads((archive / "metrics.json").read_text())
    assert metrics["completed"] >= 10
    measured = [r for r in read_jsonl(archive / "requests.jsonl") if not r["warmup"]]
    assert sum(r["ok"] for r in measured) == metrics["completed"]
