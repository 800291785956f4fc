"""The capacity search strategy on simulated servers: bracket, bisection, noise, budget."""

from __future__ import annotations

import pytest

from model_optimizer.load.rate_search import (
    RateSearchConfig,
    RateStep,
    judge,
    next_rate,
    summary,
)
from model_optimizer.recipe.spec import CapacitySpec


def capacity(**section) -> RateSearchConfig:
    """The search's config for a recipe's ``capacity`` section (defaults from the schema)."""
    return RateSearchConfig(**CapacitySpec(**section).model_dump())


def search(config: RateSearchConfig, passes) -> list[RateStep]:
    """Run the strategy against ``passes(rate) -> bool`` until it stops."""
    steps: list[RateStep] = []
    while (rate := next_rate(config, steps)) is not None:
        steps.append(RateStep(rate, passes(rate), ""))
        assert len(steps) <= config.max_windows
    return steps


def test_brackets_then_bisects_to_the_resolution():
    config = capacity(start_rate=1, growth=2, resolution=0.05, max_windows=20)
    steps = search(config, lambda rate: rate <= 11.3)
    assert [s.rate for s in steps[:5]] == [1, 2, 4, 8, 16]
    result = summary(config, steps)
    assert result["capacity_rps"] <= 11.3 < result["first_failing_rps"]
    assert result["first_failing_rps"] <= result["capacity_rps"] * 1.05
    assert result["stop_reason"].startswith("bracketed")
    assert result["capacity_rps"] > 11.3 / 1.05


def test_a_first_failure_shrinks_the_rate():
    config = capacity(start_rate=10, growth=2, resolution=0.2, max_windows=12)
    steps = search(config, lambda rate: rate <= 1.5)
    assert [s.rate for s in steps[:4]] == [10, 5, 2.5, 1.25]
    result = summary(config, steps)
    assert 1.25 <= result["capacity_rps"] <= 1.5 < result["first_failing_rps"]


def test_max_rate_and_budget_end_the_search():
    config = capacity(start_rate=1, growth=2, max_rate=6, max_windows=10)
    steps = search(config, lambda rate: True)
    assert [s.rate for s in steps] == [1, 2, 4, 6]
    assert summary(config, steps)["stop_reason"].startswith("max_rate 6")
    budget = capacity(start_rate=1, growth=2, max_windows=3)
    assert len(search(budget, lambda rate: True)) == 3
    assert summary(budget, search(budget, lambda rate: True))["stop_reason"].startswith(
        "budget")


def test_noise_above_a_failure_is_reported_not_trusted():
    config = capacity(start_rate=1, growth=2, resolution=0.1, max_windows=5)
    steps = [RateStep(1, True, ""), RateStep(2, True, ""), RateStep(4, False, ""),
             RateStep(8, True, "")]
    result = summary(config, steps)
    assert (result["capacity_rps"], result["first_failing_rps"]) == (2, 4)
    assert result["passes_above_a_failure"] == [8]
    assert next_rate(config, steps) == pytest.approx(8 ** 0.5)


def test_judge_needs_slos_and_goodput():
    ok = {"goodput_qps": 9.5, "slo_violations": []}
    assert judge(10, ok, 0.9)[0] is True
    slow = {"goodput_qps": 7.0, "slo_violations": []}
    passed, reason = judge(10, slow, 0.9)
    assert not passed and "goodput 7.00 req/s < 0.9 x 10.00 offered" in reason
    broken = {"goodput_qps": 10.0, "slo_violations": ["short: ttft_p99_ms 900 > 300"]}
    assert judge(10, broken, 0.9) == (False, "short: ttft_p99_ms 900 > 300")


def test_config_from_recipe_section():
    config = capacity(start_rate=4, max_rate=None, window_s=5)
    assert (config.start_rate, config.max_rate, config.window_s) == (4, None, 5)
    assert capacity() == RateSearchConfig(start_rate=1, growth=2, max_rate=None,
                                          resolution=0.1, min_goodput_fraction=0.9,
                                          window_s=20, max_windows=10)


def test_judge_compares_with_what_was_actually_sent():
    metrics = {"goodput_qps": 8.0, "requests": 20, "slo_violations": []}
    assert judge(10, metrics, 0.9, window_s=10, sent=85)[0] is True  # 8.5 req/s were sent
    assert judge(10, metrics, 0.9)[0] is False
    assert judge(10, metrics, 0.9, window_s=10, sent=120)[0] is False  # 12 req/s were sent


def test_a_rate_the_client_could_not_send_does_not_pass():
    # measured: offered 162 req/s for 3 s, the starved client sent 70 and all met the SLOs
    metrics = {"goodput_qps": 22.9, "requests": 70, "slo_violations": []}
    passed, reason = judge(162, metrics, 0.9, window_s=3, sent=70)
    assert passed is False and "could be sent of 162.00 asked" in reason
    # a Poisson shortfall within 4 standard deviations is the arrival process, not the client
    assert judge(162, {**metrics, "goodput_qps": 150.0}, 0.9, window_s=3, sent=420)[0] is True
