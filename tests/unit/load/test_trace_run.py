"""A trace replayed by `mopt apply`'s runner on the mock engine (a real process, real HTTP):
the replayed rate against the trace's in metrics.json and report.md, and the prefix-cache hit
rate from the engine's /metrics counters with caching on and off."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model_optimizer.engine.factory import MockEngine
from model_optimizer.load.trace import read_trace
from model_optimizer.runner import run_recipe
from tests.unit.mock_engine import mock_recipe

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "traces" / "sessions.jsonl"
SPEED = 4.0


def replay(tmp_path: Path, model_dir: Path, caching: bool) -> dict:
    loaded = mock_recipe(tmp_path, model_dir, overrides=[
        f"workload.trace={EXAMPLE}", f"workload.trace_speed={SPEED:g}x",
        "workload.num_requests=null", f"engine.enable_prefix_caching={str(caching).lower()}",
        "engine.extra_args={enable-prompt-tokens-details: true}"])
    outcome = run_recipe(loaded, tmp_path / "runs", engine_factory=MockEngine(ttft_ms=5,
                                                                              itl_ms=1))
    assert outcome.ok, outcome.failure
    metrics = json.loads((outcome.archive / "metrics.json").read_text())
    metrics["report"] = (outcome.archive / "report.md").read_text()
    return metrics


@pytest.mark.parametrize("caching", [True, False])
def test_a_trace_replayed_on_the_mock_engine(tmp_path, tiny_model_dir, caching):
    metrics = replay(tmp_path, tiny_model_dir, caching)
    trace = read_trace(EXAMPLE)
    figures = metrics["trace"]
    assert figures["replayed_requests"] == figures["trace_requests"] == len(trace.entries)
    assert figures["trace_rate_qps"] == pytest.approx(trace.rate())
    assert figures["target_rate_qps"] == pytest.approx(trace.rate() * SPEED)
    # a real clock on a shared machine: the sends keep the schedule to within a few percent
    assert figures["replayed_rate_qps"] == pytest.approx(figures["target_rate_qps"], rel=0.1)
    assert metrics["completed"] == len(trace.entries)
    assert "trace replayed at 4x" in metrics["report"]
    cache = metrics["prefix_cache"]
    if caching:  # the sessions' later turns resend their conversation: the cache serves it
        assert cache["queried_tokens"] > 0 and cache["hit_rate"] > 0.1
        assert "prefix cache:" in metrics["report"]
        assert metrics["classes"]["chat"]["cached_prompt_share"] > 0
        assert metrics["classes"]["single"]["cached_prompt_share"] == 0
    else:
        assert cache["hit_tokens"] == 0 and metrics["cached_prompt_share"] == 0
