"""`mopt capacity` on the real vLLM CPU server: one launch, a passing rate, a failing one above."""

from __future__ import annotations

import json
import math

import pytest
import yaml

from .conftest import ROOT, TINY_RECIPE, only_archive, read_jsonl, run_mopt

pytestmark = pytest.mark.integration


def test_capacity_brackets_the_highest_passing_rate(tiny_model, tmp_path):
    recipe = yaml.safe_load(TINY_RECIPE.read_text())
    recipe["model"]["path"] = str(ROOT / "models" / "tiny-llama")
    recipe["workload"].update({"prompt_tokens": 32, "output_tokens": 16, "warmup_requests": 2,
                               "request_timeout_s": 60, "warmup_steady_max_s": None})
    recipe["slo"] = {"ttft_p99_ms": 1500}
    recipe["hardware"]["price_per_hour"] = 0.5
    recipe["capacity"] = {"start_rate": 2, "growth": 3, "resolution": 0.5, "window_s": 3,
                          "max_windows": 7}
    path = tmp_path / "cap.yaml"
    path.write_text(yaml.safe_dump(recipe))
    runs = tmp_path / "runs"
    result = run_mopt("capacity", str(path), "--runs-dir", str(runs), "--json",
                      "--target-rate", "40", timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    found = json.loads(result.stdout)
    capacity, failing = found["capacity_rps"], found["first_failing_rps"]
    assert capacity is not None and failing is not None and failing > capacity
    archive = only_archive(runs)
    windows = read_jsonl(archive / "windows.jsonl")
    by_rate = {w["rate"]: w for w in windows}
    assert by_rate[capacity]["passed"] and not by_rate[failing]["passed"]
    assert by_rate[failing]["reason"]  # the failing window says why, from its own figures
    assert by_rate[capacity]["goodput_qps"] >= 0.9 * capacity * 0.5
    assert len(windows) == found["windows"] >= 3
    requests = read_jsonl(archive / "requests.jsonl")
    assert {r["window"] for r in requests} == set(range(len(windows)))
    log = (archive / "engine.log").read_text(errors="replace")
    assert log.count("Application startup complete") == 1  # every window on one server
    status = json.loads((archive / "status.json").read_text())
    assert status["status"] == "ok" and status["kind"] == "capacity"
    report = (archive / "report.md").read_text()
    assert "within the SLOs" in report
    sizing = found["sizing"]  # in replicas and money, named by what bound it
    assert sizing["rate_interval"] == [capacity, failing]
    carried = min(capacity, by_rate[capacity]["goodput_qps"])
    assert sizing["per_server_rps"] == carried
    assert sizing["replicas"] == math.ceil(40 / (carried * 0.8))
    assert sizing["cost_per_hour"] == sizing["replicas"] * 0.5
    assert sizing["cost_per_million_output_tokens"] > 0
    assert "every rate tried passed" not in sizing["binding_limit"]
    assert f"binding limit: {sizing['binding_limit']}" in report
