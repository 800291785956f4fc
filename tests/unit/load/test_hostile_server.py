"""A broken or hostile server never crashes the client: every request becomes a record."""

from __future__ import annotations

import time

from model_optimizer.load.client import run_load_sync
from model_optimizer.load.mock_server import MockServer

WORKLOAD = {"output_tokens": 4, "concurrency": 2, "num_requests": 6, "warmup_requests": 0,
            "request_timeout_s": 20, "seed": 0}


def _run(server, **workload):
    return run_load_sync(server.url, "mock-model", {**WORKLOAD, **workload}, ["a b c"])


def test_redirect_is_reported_and_never_followed():
    with MockServer() as target:
        with MockServer(redirect_to=target.url + "/v1/completions") as server:
            result = _run(server)
        assert target.counters.requests == 0  # the prompt never reached the other host
    assert len(result.records) == 6 and not any(r.ok for r in result.records)
    assert all(r.status == 307 and "redirect to" in r.error and "not followed" in r.error
               for r in result.records)


def test_choices_as_an_object_is_a_failed_record_not_a_lost_request():
    with MockServer(malformed_choices_every_n=2) as server:
        result = _run(server)
    assert len(result.records) == 6  # nothing vanished
    bad = [r for r in result.records if not r.ok]
    assert len(bad) == 3 and all("choices is dict" in r.error for r in bad)
    assert sum(r.ok for r in result.records) == 3


def test_usage_with_a_string_count_is_a_failed_record():
    with MockServer(string_usage=True) as server:
        result = _run(server)
    assert len(result.records) == 6
    assert all(not r.ok and "completion_tokens is '4'" in r.error for r in result.records)
    assert all(r.output_tokens is None for r in result.records)


def test_stream_without_newlines_is_cut_off_with_bounded_memory():
    with MockServer(no_newlines=True) as server:
        started = time.monotonic()
        result = _run(server, num_requests=2, concurrency=1)
    assert time.monotonic() - started < 20
    assert all(not r.ok and "without a newline" in r.error for r in result.records)
