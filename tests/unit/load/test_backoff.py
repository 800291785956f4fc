"""A server that refuses requests (HTTP 429, Retry-After) is not hammered, and a load against
one that keeps refusing ends, bounded in time, with the reason (issue 37)."""

from __future__ import annotations

import asyncio
from email.utils import formatdate

import pytest

from model_optimizer.load import backoff
from model_optimizer.load.backoff import Backoff, retry_after_s
from model_optimizer.load.client import run_load
from model_optimizer.load.mock_server import MockServer

from ..fast_clock import run_fast_forwarded

WORKLOAD = {"output_tokens": 4, "concurrency": 4, "num_requests": 5000, "duration_s": None,
            "warmup_requests": 0, "request_timeout_s": 20, "seed": 0}


def refused_load(**workload):
    """run_load against an always-429 server on the fast-forwarded clock: (result, requests
    the server saw, loop seconds it took)."""
    async def main():
        async with MockServer(hostile="retry_after").in_this_loop() as server:
            started = asyncio.get_running_loop().time()
            result = await run_load(server.url, "mock-model", {**WORKLOAD, **workload},
                                    ["a b c"])
            return result, server.counters, asyncio.get_running_loop().time() - started

    return run_fast_forwarded(main)


def test_retry_after_pauses_sending_and_a_refusing_server_ends_the_load():
    result, _, took_s = refused_load()
    # refused for GIVE_UP_S, pauses of RETRY_AFTER_CAP_S, 4 in flight: about 28 requests
    assert len(result.records) <= 4 * (backoff.GIVE_UP_S / backoff.RETRY_AFTER_CAP_S + 2)
    assert took_s <= backoff.GIVE_UP_S + backoff.RETRY_AFTER_CAP_S + 1
    assert "kept refusing requests for 60 s" in result.stopped_reason
    assert "HTTP 429, Retry-After: 3600" in result.stopped_reason
    assert all(not r.ok for r in result.records)
    assert result.records[0].error == "HTTP 429: rate limit exceeded"


def test_an_open_loop_pauses_too_and_sends_no_burst_after_a_pause():
    result, _, _ = refused_load(request_rate=50, concurrency=None)
    sent = sorted(r.sent_at for r in result.records)
    # 50/s for 60 s is 3,000 arrivals; sent after each pause, the due ones would be a burst
    assert len(sent) <= 4 * (backoff.GIVE_UP_S / backoff.RETRY_AFTER_CAP_S + 2)
    gaps = [later - earlier for earlier, later in zip(sent, sent[1:], strict=False)]
    assert max(gaps) >= backoff.RETRY_AFTER_CAP_S - 0.1


@pytest.mark.parametrize(("value", "seconds"), [
    ("3600", 3600.0), (" 2 ", 2.0), ("-5", 0.0), ("nan", None), ("soon", None), (None, None),
    ("1e999", None)])
def test_retry_after_values(value, seconds):
    assert retry_after_s(value) == seconds


def test_retry_after_as_an_http_date():
    assert retry_after_s(formatdate(1_000_030, usegmt=True), now_wall=1_000_000) == 30


def test_a_pause_is_capped_and_a_success_ends_the_streak():
    now = [100.0]
    state = Backoff(lambda: now[0])
    state.refused(429, {"Retry-After": "3600"})
    assert state.resume_at == 100 + backoff.RETRY_AFTER_CAP_S
    state.refused(503, {})  # a 503 without Retry-After is an error, not a refusal
    state.refused(500, {"Retry-After": "5"})
    assert state.refusals == 1
    now[0] += backoff.GIVE_UP_S
    assert state.give_up_reason() is not None
    state.succeeded()
    assert state.give_up_reason() is None
