"""The streaming client against the in-package mock server with injected delays and faults.

Timing tolerances cover event-loop scheduling jitter only: the mock's delays are lower
bounds for what the client measures. The tests of timings and schedules do not depend on
the machine's speed: they run the mock server and the client on one event loop whose clock
is fast-forwarded (``tests/unit/fast_clock.py``: it moves only when every task waits on a
timer, so sockets and code take no time on it), and the client measures on its loop's
clock, so what it reads is exactly the injected delays and the planned arrivals.
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from model_optimizer.load.client import (
    RequestRecord,
    _SSEParser,
    _StreamError,
    _StreamState,
    build_payload,
    parse_request_rate,
    prompts_needed,
    run_load,
    run_load_sync,
)
from model_optimizer.load.mock_server import MockServer
from model_optimizer.load.stats import summarize

from ..fast_clock import run_fast_forwarded

JITTER_S = 0.05  # generous: the machine may be busy with a vLLM server
MODEL = "mock-model"
PROMPTS = [f"prompt number {index} with some words" for index in range(50)]


def workload(**overrides) -> dict:
    """A resolved workload dict (recipe defaults, small)."""
    base = {"endpoint": "completions", "prompt_tokens": 8, "output_tokens": 8,
            "shared_prefix_tokens": 0, "concurrency": 2, "request_rate": "inf",
            "num_requests": 6, "duration_s": None, "warmup_requests": 0,
            "request_timeout_s": 10.0, "seed": 0}
    return {**base, **overrides}


# The fast-forwarded clock's readings are exact up to the float precision of epoch seconds
# (about 0.2 us at today's dates) and of sums of delays: 10 us bounds both.
CLOCK_S = 1e-5


def fast_forwarded(scenario, **mock):
    """``await scenario(server)`` with a MockServer(**mock) on one fast-forwarded loop."""
    async def main():
        async with MockServer(**mock).in_this_loop() as server:
            return await scenario(server)

    return run_fast_forwarded(main)


def load_fast_forwarded(load: dict, **mock):
    """run_load of ``load`` against a MockServer(**mock), on the fast-forwarded clock."""
    return fast_forwarded(lambda server: run_load(server.url, MODEL, load, PROMPTS), **mock)


# ----- timings ------------------------------------------------------------------------------

def test_timings_follow_injected_delays():
    ttft_s, itl_s, output_tokens = 0.05, 0.01, 8
    result = load_fast_forwarded(workload(output_tokens=output_tokens), ttft_s=ttft_s,
                                 itl_s=itl_s)
    assert len(result.records) == 6
    for record in result.records:
        assert record.ok, record.error
        assert record.status == 200
        assert record.ttft_s == pytest.approx(ttft_s, abs=CLOCK_S)
        assert len(record.chunk_offsets_s) == output_tokens
        assert len(record.itl_s) == output_tokens - 1
        assert record.itl_s == pytest.approx([itl_s] * (output_tokens - 1), abs=CLOCK_S)
        assert record.e2e_s == pytest.approx(ttft_s + (output_tokens - 1) * itl_s,
                                             abs=CLOCK_S)
        assert record.output_tokens == output_tokens
        assert record.prompt_tokens == 6  # the mock counts whitespace words
    summary = summarize(result.records, result.window_s)
    assert summary["tpot_mean_ms"] == pytest.approx(itl_s * 1000, abs=3.0)
    assert summary["itl_p50_ms"] == pytest.approx(itl_s * 1000, abs=3.0)
    assert summary["ttft_p50_ms"] >= ttft_s * 1000


def test_output_tokens_come_from_usage_not_chunks():
    with MockServer(tokens_per_chunk=2) as server:
        result = run_load_sync(server.url, MODEL, workload(output_tokens=9), PROMPTS)
    for record in result.records:
        assert record.ok, record.error
        assert len(record.chunk_offsets_s) == 5  # 2+2+2+2+1 tokens
        # ITL: gaps between the socket reads that carried content (chunks of one read
        # have no gap the client saw)
        assert len(record.itl_s) == record.content_reads - 1
        assert record.output_tokens == 9
    summary = summarize(result.records, result.window_s, output_tokens_expected=9)
    assert summary["mismatched_output_tokens"] == 0


def test_chat_role_chunk_is_not_a_content_chunk():
    with MockServer(ttft_s=0.02) as server:
        result = run_load_sync(server.url, MODEL, workload(endpoint="chat", output_tokens=4),
                               PROMPTS)
        payload = server.counters.payloads[0]
    for record in result.records:
        assert record.ok, record.error
        assert len(record.chunk_offsets_s) == 4
        assert record.ttft_s >= 0.02
    assert payload["messages"][0]["role"] == "user"
    assert payload["max_completion_tokens"] == 4


def test_payload_asks_for_usage_and_exact_length():
    with MockServer() as server:
        run_load_sync(server.url + "/v1/", MODEL, workload(num_requests=1), ["hi"])
        payload = server.counters.payloads[0]
    assert payload == {"model": MODEL, "prompt": "hi", "max_tokens": 8, "ignore_eos": True,
                       "stream": True, "stream_options": {"include_usage": True}}
    assert build_payload(MODEL, workload(endpoint="chat"), [{"role": "user", "content": "x"}])[
        "messages"] == [{"role": "user", "content": "x"}]


# ----- phases and load shapes ---------------------------------------------------------------

def test_warmup_excluded_from_measurement():
    delivered: list[RequestRecord] = []
    with MockServer(ttft_s=0.01) as server:
        result = run_load_sync(server.url, MODEL,
                               workload(concurrency=1, warmup_requests=3, num_requests=5),
                               PROMPTS, on_record=delivered.append)
        prompts_sent = [payload["prompt"] for payload in server.counters.payloads]
    assert [record.index for record in result.warmup_records] == [0, 1, 2]
    assert all(record.warmup for record in result.warmup_records)
    assert [record.index for record in result.records] == [0, 1, 2, 3, 4]
    assert not any(record.warmup for record in result.records)
    assert len(delivered) == 8
    assert prompts_sent == PROMPTS[:8]
    assert result.window_start >= max(record.finished_at for record in result.warmup_records)
    assert min(record.sent_at for record in result.records) >= result.window_start
    assert result.window_end == pytest.approx(max(r.finished_at for r in result.records),
                                             abs=1e-5)
    assert result.window_s == pytest.approx(result.window_end - result.window_start, abs=1e-5)


def test_closed_loop_keeps_concurrency_in_flight():
    with MockServer(ttft_s=0.1) as server:
        started = time.perf_counter()
        result = run_load_sync(server.url, MODEL, workload(concurrency=4, num_requests=8,
                                                           output_tokens=1), PROMPTS)
        elapsed_s = time.perf_counter() - started
    sent = sorted(record.sent_at - result.window_start for record in result.records)
    assert all(offset < JITTER_S for offset in sent[:4])  # four at once
    assert all(offset >= 0.1 for offset in sent[4:])  # then one per finished request
    assert elapsed_s < 0.2 + 0.5


def test_poisson_arrivals_are_seeded_and_at_rate():
    rate, count, seed = 400.0, 400, 7
    result = load_fast_forwarded(workload(request_rate=rate, concurrency=None,
                                          num_requests=count, output_tokens=2, seed=seed))
    assert all(record.ok for record in result.records)
    rng = random.Random(seed)
    expected, offset = [0.0], 0.0
    for _ in range(count - 1):
        offset += rng.expovariate(rate)
        expected.append(offset)
    actual = sorted(record.sent_at - result.window_start for record in result.records)
    lags = [sent - planned for sent, planned in zip(actual, expected, strict=True)]
    assert min(lags) > -CLOCK_S  # never before the planned arrival ...
    assert max(lags) < CLOCK_S  # ... and sent on it: the schedule is the seeded one
    measured_rate = (count - 1) / actual[-1]
    assert measured_rate == pytest.approx(rate, rel=0.25)


def test_poisson_capped_by_concurrency():
    with MockServer(ttft_s=0.05) as server:
        result = run_load_sync(server.url, MODEL, workload(
            request_rate=1000.0, concurrency=2, num_requests=6, output_tokens=1), PROMPTS)
    finished = sorted((r.sent_at, r.finished_at) for r in result.records)
    for sent_at, _ in finished:
        in_flight = sum(1 for start, end in finished if start <= sent_at < end)
        assert in_flight <= 2


def test_duration_bounds_sending_and_window_covers_in_flight():
    duration_s, request_s = 0.3, 0.1
    with MockServer(ttft_s=request_s) as server:
        result = run_load_sync(server.url, MODEL, workload(
            num_requests=None, duration_s=duration_s, concurrency=2, output_tokens=1), PROMPTS)
    assert all(record.ok for record in result.records)
    assert all(r.sent_at < result.window_start + duration_s for r in result.records)
    assert 2 <= len(result.records) <= 8
    assert duration_s <= result.window_s < duration_s + request_s + JITTER_S * 3


def test_a_request_dispatched_before_the_close_is_stamped_before_it(monkeypatch):
    """On a busy event loop a dispatched request's task may first run after the deadline
    (seen in CI: sent 0.8 ms after a 20 s window closed); its send time is the dispatch."""
    import model_optimizer.load.client as client_module

    real = client_module.build_payload

    def slow_payload(*args, **kwargs):
        time.sleep(0.2)  # blocks the loop, as a busy machine does
        return real(*args, **kwargs)

    monkeypatch.setattr(client_module, "build_payload", slow_payload)
    duration_s = 0.3
    with MockServer() as server:
        result = run_load_sync(server.url, MODEL, workload(
            num_requests=None, duration_s=duration_s, concurrency=2, output_tokens=1), PROMPTS)
    assert len(result.records) >= 2 and all(record.ok for record in result.records)
    assert all(r.sent_at < result.window_start + duration_s for r in result.records), \
        [r.sent_at - result.window_start for r in result.records]


def test_num_requests_and_duration_whichever_first():
    with MockServer() as server:
        result = run_load_sync(server.url, MODEL, workload(num_requests=3, duration_s=30.0),
                               PROMPTS)
    assert len(result.records) == 3
    assert result.window_s < 5


# ----- stopping and cancellation ------------------------------------------------------------

def test_should_stop_cancels_in_flight_and_returns_promptly():
    started = time.perf_counter()
    with MockServer(ttft_s=0.0, itl_s=0.02) as server:
        result = run_load_sync(
            server.url, MODEL, workload(num_requests=None, duration_s=60.0, output_tokens=100,
                                        concurrency=3),
            PROMPTS, should_stop=lambda: "budget" if time.perf_counter() - started > 0.3
            else None)
    elapsed_s = time.perf_counter() - started
    assert result.stopped_reason == "budget"
    assert elapsed_s < 1.5
    cancelled = [record for record in result.records if not record.ok]
    assert len(cancelled) == 3
    assert all(record.error == "cancelled: budget" for record in cancelled)
    assert all(record.chunk_offsets_s for record in cancelled)  # partial timings kept


def test_should_stop_keeps_completed_records():
    started = time.perf_counter()
    with MockServer(itl_s=0.01) as server:
        result = run_load_sync(
            server.url, MODEL, workload(num_requests=None, duration_s=60.0, output_tokens=4),
            PROMPTS, should_stop=lambda: time.perf_counter() - started > 0.4)
    assert result.stopped_reason == "stopped"
    completed = [record for record in result.records if record.ok]
    assert len(completed) >= 5
    assert all(record.error.startswith("cancelled") for record in result.records
               if not record.ok)


def test_stop_during_warmup_leaves_no_window():
    with MockServer(ttft_s=5.0) as server:
        result = run_load_sync(server.url, MODEL, workload(warmup_requests=2),
                               PROMPTS, should_stop=lambda: "now")
    assert result.records == []
    assert [record.error for record in result.warmup_records] == ["cancelled: now"] * 2
    assert result.window_s is None


def test_outer_cancellation_propagates_after_delivered_records():
    delivered: list[RequestRecord] = []

    async def scenario(server: MockServer) -> None:
        task = asyncio.create_task(run_load(server.url, MODEL, workload(
            num_requests=None, duration_s=60.0, output_tokens=1, concurrency=1), PROMPTS,
            on_record=delivered.append))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    fast_forwarded(scenario, ttft_s=0.05)
    count_at_cancel = len(delivered)
    assert count_at_cancel >= 5  # one request per 0.05 s of the 0.3 s (the 6th may tie)
    assert all(record.ok for record in delivered)


def test_on_record_exception_propagates():
    def broken(record: RequestRecord) -> None:
        raise OSError("disk full")

    with MockServer() as server, pytest.raises(OSError, match="disk full"):
        run_load_sync(server.url, MODEL, workload(), PROMPTS, on_record=broken)


def test_progress_snapshots():
    snapshots: list[dict] = []
    with MockServer(ttft_s=0.3) as server:
        run_load_sync(server.url, MODEL, workload(num_requests=4, output_tokens=1), PROMPTS,
                      on_progress=snapshots.append)
    assert snapshots, "no progress reported"
    last = snapshots[-1]
    assert last["phase"] == "measure"
    assert last["done"] == 4 and last["failed"] == 0 and last["in_flight"] == 0
    assert last["qps"] > 0 and last["ttft_p50_ms"] >= 300
    assert any(snapshot["in_flight"] == 2 for snapshot in snapshots[:-1])


# ----- failures become records --------------------------------------------------------------

def test_http_error_drop_and_stream_error_recorded_as_failed():
    with MockServer(fail_every_n=3, drop_every_n=4, drop_after_chunks=2,
                    stream_error_every_n=5) as server:
        result = run_load_sync(server.url, MODEL, workload(concurrency=1), PROMPTS)
    by_index = {record.index: record for record in result.records}
    assert [by_index[i].ok for i in range(6)] == [True, True, False, False, False, False]
    assert by_index[2].status == 500
    assert by_index[2].error == "HTTP 500: injected failure on request 3"
    assert by_index[3].status == 200
    assert "ClientPayloadError" in by_index[3].error
    assert len(by_index[3].chunk_offsets_s) == 2
    assert by_index[4].error == "error in stream: injected stream error"
    summary = summarize(result.records, result.window_s)
    assert summary["failed"] == 4
    assert summary["error_rate"] == pytest.approx(4 / 6)


def test_unknown_model_is_a_failed_request():
    with MockServer() as server:
        result = run_load_sync(server.url, "other", workload(num_requests=1), PROMPTS)
    assert result.records[0].status == 404
    assert "does not exist" in result.records[0].error


def test_connection_refused_recorded_as_failed():
    with MockServer() as server:
        url = server.url
    result = run_load_sync(url, MODEL, workload(num_requests=2), PROMPTS)
    assert [record.ok for record in result.records] == [False, False]
    assert all(record.status is None for record in result.records)
    assert all("ClientConnectorError" in record.error for record in result.records)


def test_timeout_recorded_as_failed():
    with MockServer(ttft_s=2.0) as server:
        result = run_load_sync(server.url, MODEL, workload(num_requests=2,
                                                           request_timeout_s=0.2), PROMPTS)
    assert [record.error for record in result.records] == ["timeout after 0.2 s"] * 2


# ----- protocol details ---------------------------------------------------------------------

def test_sse_parser_handles_split_events_comments_and_crlf():
    parser = _SSEParser()
    assert parser.feed(b"data: {\"a\"") == []
    assert parser.feed(b": 1}\n\n: ping\n\ndata: [DO") == ['{"a": 1}']
    assert parser.feed(b"NE]\r\n\r\n") == ["[DONE]"]
    assert parser.feed(b"event: x\ndata: line1\ndata: line2\n\n") == ["line1\nline2"]
    assert parser.feed(b"data: tail") == []
    assert parser.finish() == ["tail"]


def test_stream_state_rejects_malformed_and_error_events():
    state = _StreamState(chat=False, sent_perf=0.0)
    with pytest.raises(_StreamError, match="malformed SSE data"):
        state.handle("{not json", 1.0)
    with pytest.raises(_StreamError, match="error in stream: overloaded"):
        state.handle('{"error": {"message": "overloaded"}}', 1.0)
    state.handle('{"choices": [{"text": ""}]}', 1.0)  # a held-back token still counts
    state.handle('{"choices": [], "usage": {"completion_tokens": 1}}', 2.0)
    assert state.chunk_offsets_s == [1.0]
    assert state.usage == {"completion_tokens": 1}


def test_workload_validation_and_helpers():
    with pytest.raises(ValueError, match="num_requests or duration_s"):
        run_load_sync("http://127.0.0.1:1", MODEL, workload(num_requests=None), PROMPTS)
    with pytest.raises(ValueError, match="at least one prompt"):
        run_load_sync("http://127.0.0.1:1", MODEL, workload(), [])
    assert parse_request_rate("inf") is None
    assert parse_request_rate(float("inf")) is None
    assert parse_request_rate(2) == 2.0
    with pytest.raises(ValueError):
        parse_request_rate(0)
    assert prompts_needed(workload(warmup_requests=4, num_requests=10)) == 14
    assert prompts_needed(workload(num_requests=None, duration_s=5.0)) is None
