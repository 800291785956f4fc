"""A broken or hostile server never crashes the client: every request becomes a record."""

from __future__ import annotations

import asyncio
import time
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model_optimizer.errors import UsageError
from model_optimizer.load import mock_hostile
from model_optimizer.load import stream as stream_module
from model_optimizer.load.client import run_load_sync
from model_optimizer.load.mock_server import MockServer
from model_optimizer.load.stream import (
    ERROR_BODY_READ_BYTES,
    SSEParser,
    StreamError,
    StreamState,
    chunk_bound,
    error_text,
    idle_error,
    idle_timeout,
    stream_byte_bound,
    usage_problem,
)
from model_optimizer.recipe.spec import RecipeSpec

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
        started = time.monotonic()  # 512 tokens asked: the stream's byte bound is not first
        result = _run(server, num_requests=2, concurrency=1, output_tokens=512)
    assert time.monotonic() - started < 20
    assert all(not r.ok and "without a newline" in r.error for r in result.records)


# ----- issue 24: a server that lies or never stops ----------------------------------------


def test_an_sse_event_that_never_ends_is_cut_off_with_bounded_memory():
    with MockServer(hostile="endless_event") as server:
        started = time.monotonic()  # 512 tokens asked: the stream's byte bound is not first
        result = _run(server, num_requests=2, concurrency=1, output_tokens=512)
    assert time.monotonic() - started < 20  # the request timeout (20 s) never fires
    assert all(not r.ok and "SSE event ran over" in r.error for r in result.records)


def test_a_huge_error_body_is_read_only_up_to_the_cap():
    with MockServer(hostile="huge_error") as server:
        result = _run(server, num_requests=2, concurrency=1)
    assert all(not r.ok and r.status == 503 and r.error.startswith("HTTP 503: ")
               for r in result.records)
    assert all(len(r.error) < 400 for r in result.records)


@pytest.mark.parametrize("fault", ["tokens_1e18", "tokens_1e400"])
def test_absurd_token_counts_are_failed_records_never_counted(fault):
    with MockServer(hostile=fault) as server:
        result = _run(server)
    assert len(result.records) == 6
    assert all(not r.ok and "implausible usage: completion_tokens" in r.error
               and "for a request of at most 4 tokens" in r.error for r in result.records)
    assert all(r.output_tokens is None and r.prompt_tokens is None for r in result.records)
    assert all(len(r.error) < 200 for r in result.records)  # a 401-digit number is not shown


def test_done_before_any_chunk_ends_the_stream_with_nothing_counted():
    with MockServer(hostile="done_first") as server:
        result = _run(server)
    assert all(not r.ok and r.error == "no generated output in stream" for r in result.records)
    assert all(r.chunk_offsets_s == [] and r.output_tokens is None for r in result.records)


def test_events_after_done_are_never_counted():
    with MockServer(hostile="after_done") as server:
        result = _run(server)
    assert all(r.ok for r in result.records)
    assert all(len(r.chunk_offsets_s) == 4 and r.output_tokens == 4 for r in result.records)


def test_a_bearer_key_the_server_echoes_is_scrubbed_from_the_record(monkeypatch):
    key = "plainkey-42"  # not token-shaped: only knowing what was sent can hide it
    monkeypatch.setenv("MOPT_UNIT_KEY", key)
    with MockServer(hostile="echo_key") as server:
        result = _run(server, api_key_env="MOPT_UNIT_KEY")
    assert all(r.status == 400 and "you sent Authorization: Bearer" in r.error
               for r in result.records)
    assert not any(key in r.error for r in result.records)


def test_credentials_and_a_query_in_the_url_reach_the_right_path():
    with MockServer() as server:
        host = server.url.removeprefix("http://")
        result = _run(_Url(f"http://alice:pw@{host}/v1/?api_key=qk"))
    assert all(r.ok for r in result.records), result.records[0].error


def test_credentials_in_the_url_and_an_api_key_variable_are_refused(monkeypatch):
    monkeypatch.setenv("MOPT_UNIT_KEY", "k")
    with pytest.raises(UsageError, match="one Authorization header"):
        _run(_Url("http://alice:pw@127.0.0.1:9/"), api_key_env="MOPT_UNIT_KEY")


class _Url:
    def __init__(self, url: str) -> None:
        self.url = url


def test_error_text_reads_at_most_the_cap():
    class Content:
        given = 0

        async def read(self, n: int) -> bytes:
            self.given += n
            return b"x" * n

    class Response:
        content = Content()
        reason = "Service Unavailable"

    text = asyncio.run(error_text(Response()))
    assert Response.content.given == ERROR_BODY_READ_BYTES
    assert text == "x" * 300


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([b"data: ", b"x" * 1000, b"\n", b"\r\n", b": c\n", b"\n\n",
                                 b"event: e\n", b"data: [DONE]\n\n"]), max_size=40),
       st.integers(64, 4096))
def test_the_sse_parser_stays_bounded_whatever_the_shape(pieces, cut):
    limit = 8000  # a small event cap, so that short streams reach it
    stream = b"".join(pieces) * 4
    parser = SSEParser()
    with mock.patch.object(stream_module, "MAX_SSE_EVENT_BYTES", limit):
        try:
            for start in range(0, len(stream), cut):
                for event in parser.feed(stream[start:start + cut]):
                    assert len(event) <= limit
            parser.finish()
        except StreamError as exc:
            assert "ran over" in str(exc)
    assert sum(map(len, parser._data_lines)) <= limit


@given(st.one_of(st.integers(-10**500, 10**500), st.floats(), st.text(max_size=50), st.none(),
                 st.booleans()),
       st.integers(1, 10**6))
def test_usage_is_plausible_only_when_it_is_a_count_within_what_was_asked(claim, asked):
    problem = usage_problem({"completion_tokens": claim, "prompt_tokens": 5}, asked)
    plausible = isinstance(claim, int) and not isinstance(claim, bool) and 0 <= claim <= asked
    assert (problem is None) == plausible
    assert problem is None or len(problem) < 200


# ----- issue 37: a stream larger than its request can produce ------------------------------


def test_a_flood_of_chunks_fails_the_request_at_the_bound(monkeypatch):
    monkeypatch.setattr(mock_hostile, "FLOOD_CHUNKS", 5_000)  # 400,000 in the benchmark
    with MockServer(hostile="chunk_flood") as server:
        result = _run(server, num_requests=2, concurrency=1)
    bound = chunk_bound(4)
    assert bound == 4 + stream_module.CHUNK_SLACK
    assert all(not r.ok and f"more than {bound} content chunks" in r.error
               for r in result.records)
    assert all(len(r.chunk_offsets_s) == bound and r.output_tokens is None
               for r in result.records)  # what one record holds is bounded too


def test_the_chunk_bound_is_the_tokens_asked_and_a_small_slack():
    state = StreamState(chat=False, sent_perf=0.0, requested=2)
    chunk = '{"choices": [{"index": 0, "text": " a"}]}'
    for _ in range(chunk_bound(2)):
        state.handle(chunk, 1.0)
    with pytest.raises(StreamError, match="at most 2 tokens"):
        state.handle(chunk, 1.0)


def test_a_gzip_bomb_of_newlines_fails_the_request_at_the_byte_bound(monkeypatch):
    monkeypatch.setattr(mock_hostile, "NEWLINE_BOMB_BYTES", 16 << 20)  # 2 GiB in the benchmark
    with MockServer(hostile="gzip_newlines") as server:
        started = time.process_time()
        result = _run(server, num_requests=1, concurrency=1)
    assert time.process_time() - started < 5  # 16 MiB of newlines parsed take longer
    assert stream_byte_bound(4) < 2 << 20
    assert [r.error for r in result.records] == [
        f"the stream ran over {stream_byte_bound(4)} bytes (decoded), more than its request "
        "can produce"]


def test_a_stream_that_stalls_mid_chunk_fails_at_the_idle_timeout():
    with MockServer(hostile="stall_mid_chunk") as server:
        started = time.monotonic()
        result = _run(server, num_requests=2, concurrency=2, idle_timeout_s=0.5)
    assert time.monotonic() - started < 10  # the request timeout (20 s) never fires
    assert [r.error for r in result.records] == [idle_error(0.5)] * 2
    assert all(len(r.chunk_offsets_s) == 1 for r in result.records)  # what came is kept


def test_the_idle_timeout_is_a_workload_setting_with_a_default():
    assert idle_timeout({}) == stream_module.IDLE_TIMEOUT_S == 60
    assert idle_timeout({"idle_timeout_s": None}) is None
    assert RecipeSpec.model_validate({"recipe_version": 1, "name": "x", "model": {"path": "m"}}
                                     ).workload.idle_timeout_s == 60
