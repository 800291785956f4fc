"""No silent success: a run is ok only once its figures exist and some request completed."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from model_optimizer.errors import EXIT_RUN_FAILED, EXIT_SLO_FAILED
from model_optimizer.load.mock_server import MockServer
from model_optimizer.models.tiny import build_tiny_model
from model_optimizer.recipe import load_recipe_text
from model_optimizer.runner import bench_endpoint

ROOT = Path(__file__).resolve().parents[2]
RECIPE = """recipe_version: 1
name: hard
model: {path: endpoint}
workload: {prompt_tokens: 16, output_tokens: 4, concurrency: 2, num_requests: 10,
           warmup_requests: 0, request_timeout_s: 20}
"""


@pytest.fixture(scope="module")
def tokenizer() -> str:
    return str(build_tiny_model(ROOT / "models" / "tiny-llama"))


def _bench(server, tokenizer, runs, sets=()):
    loaded = load_recipe_text(RECIPE, "<test>", list(sets))
    return bench_endpoint(server.url, loaded, "mock-model", tokenizer, runs)


def test_every_request_failing_is_a_failure_not_slos_met(tokenizer, tmp_path):
    with MockServer(fail_every_n=1) as server:
        outcome = _bench(server, tokenizer, tmp_path)
    assert outcome.status == "failed:no_request_completed"
    assert outcome.exit_code == EXIT_RUN_FAILED and not outcome.slo_met
    assert "injected failure" in outcome.failure.evidence[0]
    assert json.loads((outcome.archive / "failure.json").read_text())["class"] == (
        "no_request_completed")
    assert json.loads((outcome.archive / "metrics.json").read_text())["requests"] == 10


def test_a_default_minimum_success_rate_applies_without_an_slo(tokenizer, tmp_path):
    with MockServer(fail_every_n=5) as server:
        outcome = _bench(server, tokenizer, tmp_path)
    assert outcome.ok and outcome.exit_code == EXIT_SLO_FAILED
    assert outcome.metrics["slo_violations"] == ["success_rate 0.8 < 0.95"]
    with MockServer(fail_every_n=5) as server:
        relaxed = _bench(server, tokenizer, tmp_path, ["slo.min_success_rate=0.5"])
    assert relaxed.slo_met


def test_malformed_usage_never_marks_the_run_ok(tokenizer, tmp_path):
    with MockServer(string_usage=True) as server:
        outcome = _bench(server, tokenizer, tmp_path)
    assert outcome.status == "failed:no_request_completed"
    assert "completion_tokens" in outcome.failure.evidence[0]


def test_a_huge_request_count_starts_sending_at_once(tokenizer, tmp_path):
    with MockServer() as server:
        started = time.monotonic()
        outcome = _bench(server, tokenizer, tmp_path,
                         ["workload.num_requests=10000000", "workload.duration_s=1"])
    assert outcome.ok and outcome.metrics["completed"] > 0
    assert time.monotonic() - started < 30  # building every prompt first took minutes


def test_an_unexpected_error_in_a_run_is_an_archived_failure(tokenizer, tmp_path, monkeypatch):
    from model_optimizer import runner
    from model_optimizer.recipe import load_recipe

    class NoServer:
        def __init__(self, argv, env, *args, **kwargs):
            self.argv, self.env_extra, self.stopped = argv, env, False

        def stop(self):
            self.stopped = True

    def broken_launch(*args):
        raise TypeError("a bug in mopt")
    monkeypatch.setattr(runner, "EngineProcess", NoServer)
    monkeypatch.setattr(runner, "launch_engine", broken_launch)
    outcome = runner.run_recipe(load_recipe(ROOT / "recipes" / "tiny-cpu.yaml"), tmp_path)
    assert outcome.status == "failed:internal_error" and outcome.exit_code == EXIT_RUN_FAILED
    assert "TypeError: a bug in mopt" in outcome.failure.hint
    status = json.loads((outcome.archive / "status.json").read_text())
    assert status["status"] == "failed:internal_error"
    assert (outcome.archive / "manifest.json").is_file()
