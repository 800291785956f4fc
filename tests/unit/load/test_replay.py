"""Trace replay: arrival times kept (scaled by the speed) on the fast-forwarded clock, sessions
sent with their conversation as a shared prefix, and the mock's prefix cache finding it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from model_optimizer.errors import UsageError
from model_optimizer.load.client import run_load
from model_optimizer.load.mock_prefix import BLOCK
from model_optimizer.load.mock_server import MockServer
from model_optimizer.load.replay import trace_items

from ..fast_clock import run_fast_forwarded

CLOCK_S = 1e-5  # the fast-forwarded clock's resolution at epoch seconds (test_load_client)
MODEL = "mock-model"


class WordSource:
    """A PromptSource stand-in over the mock's word tokens (one word, one token)."""

    def completion_prompt(self, index, prompt_tokens=None):
        rng = random.Random(f"words:{index}")
        return " ".join(f"w{rng.randrange(3, 500)}" for _ in range(prompt_tokens or 8))

    def chat_prompt(self, index, prompt_tokens=None):
        return [{"role": "user", "content": self.completion_prompt(index, prompt_tokens)}]

    def text_tokens(self, text):
        return len(text.split())

    server_prompt_tokens = text_tokens

    def chat_prompt_tokens(self, messages):
        return sum(len(m["content"].split()) for m in messages)


def workload(trace: Path, **overrides) -> dict:
    base = {"endpoint": "completions", "prompt_tokens": 8, "output_tokens": 8, "seed": 0,
            "trace": str(trace), "trace_speed": 1, "concurrency": None, "request_rate": "inf",
            "num_requests": None, "duration_s": 1.0, "warmup_requests": 0,
            "request_timeout_s": 60.0}
    return {**base, **overrides}


def write_trace(tmp_path: Path, lines: list[dict]) -> Path:
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def replay(load: dict, items, **mock):
    async def main():
        async with MockServer(**mock).in_this_loop() as server:
            result = await run_load(server.url, MODEL, load, items)
            return result, server
    return run_fast_forwarded(main)


TIMES = [100.0, 100.4, 100.4, 101.0, 102.5, 106.0]


@pytest.mark.parametrize("speed", ["1x", "2x", 0.5])
def test_requests_are_sent_at_the_traces_own_times_scaled_by_speed(tmp_path, speed):
    path = write_trace(tmp_path, [{"timestamp": t, "prompt_tokens": 20, "output_tokens": 4}
                                  for t in TIMES])
    load = workload(path, trace_speed=speed, warmup_requests=2)
    items = trace_items(load, WordSource(), None, None)
    # every request takes longer than the gaps: a capped or closed loop would show in the times
    result, server = replay(load, items, ttft_s=1.5, itl_s=0.1)
    factor = {"1x": 1.0, "2x": 2.0, 0.5: 0.5}[speed]
    sent = sorted(r.sent_at for r in result.records)
    assert len(sent) == len(TIMES) and all(r.ok for r in result.records)
    assert [s - sent[0] for s in sent] == pytest.approx(
        [(t - TIMES[0]) / factor for t in TIMES], abs=CLOCK_S)
    figures = items.replay.figures(result.records)
    own_rate = (len(TIMES) - 1) / (TIMES[-1] - TIMES[0])
    assert figures["trace_rate_qps"] == pytest.approx(own_rate)
    assert figures["target_rate_qps"] == pytest.approx(own_rate * factor)
    assert figures["replayed_rate_qps"] == pytest.approx(own_rate * factor, rel=1e-6)
    assert figures["send_late_max_ms"] == pytest.approx(0.0, abs=CLOCK_S * 1000)
    # the warm-up sent synthetic prompts, none of the trace's
    trace_prompts = {items[i].prompt for i in range(len(items))}
    warmups = [p["prompt"] for p in server.counters.payloads[:2]]
    assert len(result.warmup_records) == 2 and not trace_prompts & set(warmups)


def test_duration_does_not_cut_a_trace_and_num_requests_replays_the_first_n(tmp_path):
    path = write_trace(tmp_path, [{"timestamp": t, "prompt_tokens": 5, "output_tokens": 2}
                                  for t in TIMES])
    result, _ = replay(workload(path, duration_s=0.5), trace_items(
        workload(path), WordSource(), None, None))
    assert len(result.records) == len(TIMES)
    load = workload(path, num_requests=3)
    items = trace_items(load, WordSource(), None, None)
    result, _ = replay(load, items)
    assert len(items) == 3 and len(result.records) == 3
    assert items.replay.figures(result.records)["trace_requests"] == len(TIMES)


def session_trace(tmp_path: Path, sessions: bool) -> Path:
    lines = []
    for turn in range(3):
        for name in ("a", "b"):
            line = {"timestamp": turn * 2.0 + (name == "b"), "output_tokens": 24,
                    "class": "chat"}
            line.update({"prompt_tokens": 70} if turn == 0 else
                        {"prompt": f"question {turn} of {name}: why?"})
            if sessions:
                line["session"] = name
            lines.append(line)
    return write_trace(tmp_path, lines)


def test_a_sessions_turn_carries_the_conversation_so_far(tmp_path):
    load = workload(session_trace(tmp_path, sessions=True))
    items = trace_items(load, WordSource(), None, None)
    by_session: dict[str, list[str]] = {}
    for index, entry in enumerate(_entries(load)):
        by_session.setdefault(entry.session, []).append(items[index].prompt)
    for prompts in by_session.values():
        for earlier, later in zip(prompts, prompts[1:], strict=False):
            assert later.startswith(earlier + "\n\n")
            assert len(later.split()) == len(earlier.split()) + 24 + len(
                later.split("\n\n")[-1].split())  # the stand-in output, then the new input
    chat = trace_items(workload(load["trace"], endpoint="chat"), WordSource(), None, None)
    first, second = chat[0].prompt, chat[2].prompt
    assert second[:1] == first and [m["role"] for m in second] == ["user", "assistant", "user"]


def _entries(load):
    from model_optimizer.load.trace import read_trace
    return read_trace(load["trace"]).entries


@pytest.mark.parametrize("sessions", [True, False])
def test_the_mock_prefix_cache_hits_the_sessions_shared_prefix(tmp_path, sessions):
    load = workload(session_trace(tmp_path, sessions))
    items = trace_items(load, WordSource(), None, None)
    result, server = replay(load, items, prompt_tokens_details=True)
    cache = server.mock.prefix_cache
    assert cache.queries == sum(len(items[i].prompt.split()) for i in range(len(items)))
    entries = _entries(load)
    by_index = {r.index: r for r in result.records}
    for index, entry in enumerate(entries):
        shared = 0 if entry.previous is None else len(items[entry.previous].prompt.split())
        assert by_index[index].cached_prompt_tokens == BLOCK * (shared // BLOCK)
    assert (cache.hits > 0) is sessions


def test_a_conversation_longer_than_max_model_len_names_its_line(tmp_path):
    load = workload(session_trace(tmp_path, sessions=True))
    with pytest.raises(UsageError, match=r"trace.jsonl:5: turn 3 of session 'a' needs about"):
        trace_items(load, WordSource(), None, 151)  # 70 + 24, + 5 + 24, + 5 + 24 = 152
    assert len(trace_items(load, WordSource(), None, 152)) == 6
