"""Warm-up until steady: the rule on token streams with known shapes, and the client on the
mock server."""

from __future__ import annotations

import time

import pytest

from model_optimizer.load.client import run_load_sync
from model_optimizer.load.mock_server import MockServer
from model_optimizer.load.warmup import ROUND_S, STEADY_ROUNDS, SteadyWarmup


def feed_rate(warmup: SteadyWarmup, rate_at, until: float, step: float = 0.05) -> float | None:
    """Stream ``rate_at(t)`` tokens/s in ``step`` slices; the time it decided, or None."""
    t = warmup.start
    while t < until:
        warmup.streamed(round(rate_at(t - warmup.start) * step), t)
        t += step
        if warmup.done(t):
            return t - warmup.start
    return None


def test_a_flat_rate_is_steady_after_the_first_rounds():
    warmup = SteadyWarmup(100.0, max_s=60)
    decided = feed_rate(warmup, lambda t: 400.0, 100.0 + 60)
    assert warmup.verdict == "steady"
    assert decided == pytest.approx(STEADY_ROUNDS * ROUND_S, abs=0.1)


def test_a_fresh_server_ramp_is_not_steady_until_it_levels():
    # the first minute a third as fast (measured 2026-12-04: 15 then 44 req/s), levelling at 30 s
    warmup = SteadyWarmup(0.0, max_s=120)
    decided = feed_rate(warmup, lambda t: 150 + 290 * min(t, 30) / 30, 120)
    assert warmup.verdict == "steady" and decided >= 30 + ROUND_S  # a flat round at least
    assert warmup.summary()["round_tok_s"][0] < 0.5 * warmup.summary()["round_tok_s"][-1]


def test_a_rate_that_never_settles_gives_up_at_the_limit():
    warmup = SteadyWarmup(0.0, max_s=20)
    feed_rate(warmup, lambda t: 400 if int(t / ROUND_S) % 2 else 200, 30)
    assert warmup.verdict == "not steady" and warmup.summary()["seconds"] == pytest.approx(20,
                                                                                          abs=0.1)


def test_a_round_without_tokens_ends_the_warm_up():
    warmup = SteadyWarmup(0.0, max_s=60)
    feed_rate(warmup, lambda t: 0.0, 60)
    assert warmup.verdict == "no tokens streamed" and warmup.summary()["seconds"] < 2 * ROUND_S


@pytest.mark.slow
def test_the_client_warms_up_until_steady_then_measures():
    workload = {"prompt_tokens": 8, "output_tokens": 8, "concurrency": 4, "num_requests": 8,
                "warmup_requests": 2, "warmup_steady_max_s": 30}
    with MockServer(ttft_s=0.005, itl_s=0.002) as server:
        result = run_load_sync(server.url, "mock-model", workload, ["a prompt"] * 4)
    assert result.warmup["verdict"] == "steady"
    assert STEADY_ROUNDS * ROUND_S <= result.warmup["seconds"] < 30
    assert len(result.warmup_records) > 2 and len(result.records) == 8
    assert all(r.sent_at >= max(w.finished_at for w in result.warmup_records) - 1e-6
               for r in result.records)  # the window opens after the warm-up drained


class HeldGate:
    """A card gate that is done ``hold_s`` seconds after the warm-up began (real time)."""

    def __init__(self, hold_s: float) -> None:
        self.hold_s, self.began, self.polls = hold_s, None, 0

    def begin(self) -> None:
        self.began = time.monotonic()

    def done(self) -> bool:
        self.polls += 1
        return time.monotonic() - self.began >= self.hold_s

    def summary(self) -> dict:
        return {"verdict": "steady", "polls": self.polls}


@pytest.mark.slow
def test_the_client_keeps_warming_up_until_the_card_gate_is_done():
    workload = {"prompt_tokens": 8, "output_tokens": 8, "concurrency": 2, "num_requests": 4,
                "warmup_requests": 1, "warmup_steady_max_s": 1}
    gate = HeldGate(3.0)
    with MockServer(ttft_s=0.005, itl_s=0.002) as server:
        result = run_load_sync(server.url, "mock-model", workload, ["a prompt"] * 4, card=gate)
    assert result.warmup["verdict"] == "not steady"  # throughput gave up at 1 s ...
    assert 3.0 <= result.warmup["seconds"] < 6  # ... the card held the warm-up to 3 s
    assert result.warmup["card"]["polls"] > 10 and len(result.records) == 4
