"""Per-read timing: chunks that waited together in the socket are not timed as 0.

The stream below is vLLM's completions SSE format (one event per token, then a usage event
and [DONE]), as `vllm.entrypoints.openai` writes it; the burst case is what the README's
first run recorded (2026-12-04): 32 chunks of one request delivered to the client in one
socket read, 742 ms after it was sent, while vLLM had sent them apart.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from model_optimizer.load.clock import LoopLag
from model_optimizer.load.stats import (
    request_tpot_s,
    summarize,
    tpot_coverage,
    tpot_measurable,
)
from model_optimizer.load.stream import RequestRecord, SSEParser, StreamState, fill_timings

TOKENS = 32


def _event(payload: dict) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()


def vllm_stream(tokens: int = TOKENS) -> list[bytes]:
    """One request's SSE events as vLLM 0.32 sends them (completions, include_usage)."""
    events = [_event({"id": "cmpl-1", "object": "text_completion", "created": 1796400000,
                      "model": "tiny", "choices": [{"index": 0, "text": f"t{i}",
                                                    "logprobs": None, "finish_reason": None}],
                      "usage": None}) for i in range(tokens)]
    events.append(_event({"id": "cmpl-1", "object": "text_completion", "created": 1796400000,
                          "model": "tiny", "choices": [], "usage": {
                              "prompt_tokens": 64, "total_tokens": 64 + tokens,
                              "completion_tokens": tokens}}))
    events.append(b"data: [DONE]\n\n")
    return events


def record_from_reads(reads: list[tuple[float, bytes]], lag_s: float | None) -> RequestRecord:
    """Feed ``(read time, bytes)`` pairs as the client's read loop does."""
    parser, state = SSEParser(), StreamState(chat=False, sent_perf=0.0)
    for now, data in reads:
        for event in parser.feed(data):
            state.handle(event, now)
    record = RequestRecord(index=0, warmup=False, sent_at=0.0, ok=True,
                           requested_output_tokens=TOKENS)
    fill_timings(record, state)
    record.read_lag_s = lag_s
    return record


def test_a_burst_read_has_no_tpot_and_no_itl_never_zero():
    burst = record_from_reads([(0.742, b"".join(vllm_stream()))], lag_s=0.70)
    assert len(burst.chunk_offsets_s) == TOKENS and burst.content_reads == 1
    assert burst.ttft_s == burst.e2e_s == 0.742
    assert burst.output_tokens == TOKENS
    assert not tpot_measurable(burst) and request_tpot_s(burst) is None
    assert burst.itl_s == []


def test_reads_apart_give_the_decode_time():
    events = vllm_stream()
    reads = [(0.050 + 0.004 * i, event) for i, event in enumerate(events)]
    spread = record_from_reads(reads, lag_s=0.002)
    assert spread.content_reads == TOKENS
    assert request_tpot_s(spread) == pytest.approx(0.004)
    assert spread.itl_s == pytest.approx([0.004] * (TOKENS - 1))


def test_a_span_within_the_read_lag_is_not_measurable():
    events = vllm_stream()
    two_reads = [(0.050, b"".join(events[:1])), (0.060, b"".join(events[1:]))]
    lagged = record_from_reads(two_reads, lag_s=0.2)   # 10 ms span, 200 ms lag
    assert lagged.content_reads == 2 and not tpot_measurable(lagged)
    steady = record_from_reads(two_reads, lag_s=0.001)
    assert tpot_measurable(steady)


def _window(bursts: int, spread: int) -> list[RequestRecord]:
    events = vllm_stream()
    burst = [record_from_reads([(0.742, b"".join(events))], lag_s=0.7) for _ in range(bursts)]
    reads = [(0.05 + 0.004 * i, e) for i, e in enumerate(events)]
    timed = [record_from_reads(reads, lag_s=0.002) for _ in range(spread)]
    return burst + timed


def test_a_window_of_late_reads_reports_tpot_not_measurable_and_fails_its_slo():
    records = _window(bursts=168, spread=156)   # the README run's split, 2026-12-04
    summary = summarize(records, 10.0, {"tpot_p50_ms": 50})
    assert tpot_coverage(records) == (168, 324)
    assert summary["tpot_p50_ms"] is None and summary["itl_p50_ms"] is None
    assert "168 of 324" in summary["tpot_note"]
    assert summary["slo_met"] is False
    assert summary["slo_violations"] == ["tpot_p50_ms no data > 50"]
    assert summary["good_requests"] == 156  # the burst requests never meet a TPOT bound
    assert summary["ttft_p50_ms"] is not None  # TTFT and E2E stay reported


def test_a_few_late_reads_leave_tpot_measured_from_the_rest():
    records = _window(bursts=3, spread=97)
    summary = summarize(records, 10.0, {"tpot_p50_ms": 50})
    assert summary["tpot_note"] is None and summary["tpot_unmeasurable"] == 3
    assert summary["tpot_p50_ms"] == pytest.approx(4.0)
    assert summary["slo_met"] is True


def test_loop_lag_sees_a_blocked_loop():
    async def main() -> tuple[float | None, float | None, dict]:
        loop = asyncio.get_running_loop()
        lag = LoopLag(loop.time)
        ticking = asyncio.create_task(lag.run())
        await asyncio.sleep(0.1)
        quiet_end = loop.time()
        import time
        time.sleep(0.25)  # the client's core taken away: nothing runs on the loop
        await asyncio.sleep(0.05)
        ticking.cancel()
        return (lag.worst_between(0.0, quiet_end - 0.02), lag.worst_between(quiet_end,
                loop.time()), lag.summary(quiet_end, loop.time()))

    quiet, blocked, summary = asyncio.run(main())
    assert blocked is not None and blocked >= 0.2
    assert quiet is not None and quiet < 0.1
    assert summary["client_lag_max_ms"] >= 200
