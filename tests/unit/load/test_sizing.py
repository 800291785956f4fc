"""Capacity in servers and money (load/sizing.py): replicas, cost, the binding limit."""

from __future__ import annotations

import math

import pytest

from model_optimizer.load.sizing import binding_limit, replicas_for, size


def result(capacity=12.0, failing=14.0, failing_figures=None):
    steps = [{"rate": 8.0, "passed": True, "qps": 8.0, "output_tok_s": 256.0},
             {"rate": capacity, "passed": True, "qps": 11.5, "output_tok_s": 368.0},
             {"rate": failing, "passed": False, "reason": "x", **(failing_figures or {})}]
    return {"capacity_rps": capacity, "first_failing_rps": failing, "steps": steps}


def test_replicas_keep_the_headroom_free():
    assert replicas_for(300, 12.0, 0.2) == 32  # 300 / 9.6 = 31.25
    assert replicas_for(96, 12.0, 0.2) == 10  # exactly 10 servers at 9.6 each
    assert replicas_for(1, 12.0, 0.0) == 1
    assert replicas_for(300, None, 0.2) is None


def test_the_fleet_answer_with_a_price():
    answer = size(result(), target_rps=300, headroom=0.2, price_per_hour=2.5)
    assert answer.rate_rps == 12.0 and answer.rate_interval == (12.0, 14.0)
    assert (answer.replicas, answer.replicas_optimistic) == (32, 27)  # 300/11.2 = 26.8
    assert answer.output_tokens_per_request == pytest.approx(32.0)
    assert answer.cost_per_hour == pytest.approx(80.0)
    assert answer.cost_per_million_output_tokens == pytest.approx(
        80.0 / (300 * 32.0 * 3600) * 1e6)


def test_without_a_target_one_server_at_its_sustainable_rate_is_priced():
    answer = size(result(), price_per_hour=3.6)
    assert answer.replicas is None and answer.cost_per_hour == pytest.approx(3.6)
    assert answer.cost_per_million_output_tokens == pytest.approx(3.6 / (12 * 32 * 3600) * 1e6)


def test_no_price_no_cost_and_no_capacity_no_replicas():
    assert size(result(), target_rps=50).cost_per_hour is None
    none = size({"capacity_rps": None, "first_failing_rps": 2.0, "steps": []}, target_rps=50)
    assert none.replicas is None and none.cost_per_million_output_tokens is None
    with pytest.raises(ValueError, match="headroom"):
        size(result(), headroom=1.0)


@pytest.mark.parametrize(("figures", "expected"), [
    ({"preemptions": 3, "slo_violations": ["ttft_p99_ms 6000 > 5000"]}, "preemptions (3 "),
    ({"kv_cache_usage_max": 0.995}, "KV capacity (cache 100% full"),
    ({"kv_cache_usage_max": 0.5, "slo_violations": ["ttft_p99_ms 6000 > 5000"]},
     "TTFT p99 (ttft_p99_ms 6000 > 5000)"),
    ({"slo_violations": ["long: e2e_p99_ms 9000 > 8000"]}, "E2E p99 of class long"),
    ({"reason": "goodput 3.00 req/s < 0.95 x 4.00 offered"}, "throughput: the server fell"),
    ({"reason": "only 2.00 req/s could be sent of 4.00 asked"}, "the load generator"),
])
def test_the_binding_limit_is_named(figures, expected):
    assert binding_limit({"reason": "", **figures}).startswith(expected)


def test_no_failing_window_means_no_limit_was_reached():
    assert "every rate tried passed" in binding_limit(None)
    assert "every rate tried passed" in size({"capacity_rps": 40.0, "first_failing_rps": None,
                                              "steps": []}).binding_limit
    assert math.isclose(size(result()).rate_interval[1], 14.0)


def test_a_server_is_planned_at_what_it_carried_when_less_than_the_rate():
    measured = result()
    measured["steps"][1]["goodput_qps"] = 10.0  # offered 12 req/s, 10 carried within SLO
    answer = size(measured, target_rps=100, headroom=0.2, price_per_hour=1.0)
    assert answer.per_server_rps == 10.0 and answer.replicas == 13  # 100 / 8 = 12.5
    assert size(result(), target_rps=100).per_server_rps == 12.0  # no goodput recorded
    alone = size(measured, price_per_hour=1.0)
    assert alone.cost_per_million_output_tokens == pytest.approx(1.0 / (10 * 32 * 3600) * 1e6)
