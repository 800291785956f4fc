"""One streamed request: its JSON body, its SSE stream parsed and checked, its record.

The measurement follows docs/design.md section 3 and matches ``vllm bench serve``:

- A *content chunk* is an SSE event with a non-empty ``choices`` list, except a chat role
  announcement (``delta`` with ``role`` and no content). vLLM sends one such chunk per generated
  token, even when the token's text is held back (an incomplete UTF-8 character) and so empty.
- ``output_tokens`` and ``prompt_tokens`` come from the server's ``usage`` (requested with
  ``stream_options.include_usage``); chunks are never counted for them. A stream without
  ``usage`` or without ``[DONE]`` is a failed request, as is one with an ``error`` event.

What a server says is not trusted (docs/security.md): ``usage_problem`` is the one rule for
plausible counts (``completion_tokens`` at most what was asked, both at most
``MAX_PLAUSIBLE_TOKENS``); nothing after ``[DONE]`` is read or counted; an SSE line, an SSE
event and an error body are each read up to a bound; a stream is bounded by what its request
can produce (``chunk_bound`` content chunks, ``stream_byte_bound`` decoded bytes: past
either the request fails, so a record never holds more than its request asked for); a
record's error text is scrubbed of the credentials mopt sent (a server may echo them) and of
anything token-shaped.

The orchestration (load shapes, window, stop, progress) is in ``model_optimizer.load.client``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import aiohttp

from model_optimizer.httpcall import join_url
from model_optimizer.load.workload import WorkItem
from model_optimizer.secrets import redact_text
from model_optimizer.shown import printable

MAX_SSE_LINE_BYTES = 1 << 20  # an SSE line longer than this is a broken stream
MAX_SSE_EVENT_BYTES = 4 << 20  # so is an event (its data lines together) longer than this
ERROR_BODY_CHARS = 300
ERROR_BODY_READ_BYTES = 64 << 10  # of a non-200 answer's body; the rest is never read
MAX_PLAUSIBLE_TOKENS = 1 << 24  # no model has a context this long: a count above is made up
CHUNK_SLACK = 16  # content chunks allowed beyond the tokens asked (vLLM sends one per token)
UNASKED_TOKENS = 1 << 16  # the bounds' token count for a request without max_tokens
STREAM_BYTES_FIXED = 1 << 20  # decoded bytes a stream may carry besides its tokens' chunks
STREAM_BYTES_PER_TOKEN = 16 << 10  # per token asked (a vLLM chunk is about 250 bytes)
IDLE_TIMEOUT_S = 60.0  # workload.idle_timeout_s's default: no byte for this long fails a request


def idle_timeout(workload: Mapping[str, Any]) -> float | None:
    """Seconds a request may go without a byte from the server (None: no idle bound)."""
    value = workload.get("idle_timeout_s", IDLE_TIMEOUT_S)
    return None if value is None else float(value)


def idle_error(seconds: float) -> str:
    """The error of a request the idle timeout ended."""
    return f"no byte from the server for {seconds:g} s (workload.idle_timeout_s)"


def chunk_bound(requested: int | None) -> int:
    """The most content chunks a stream may carry for a request of ``requested`` tokens."""
    return (UNASKED_TOKENS if requested is None else requested) + CHUNK_SLACK


def stream_byte_bound(requested: int | None) -> int:
    """The most decoded bytes (after any Content-Encoding) a stream may carry."""
    tokens = UNASKED_TOKENS if requested is None else requested
    return STREAM_BYTES_FIXED + STREAM_BYTES_PER_TOKEN * tokens


@dataclass
class RequestRecord:
    """The measured facts about one request. Offsets and durations in seconds."""

    index: int
    warmup: bool
    sent_at: float
    ttft_s: float | None = None
    e2e_s: float | None = None
    chunk_offsets_s: list[float] = field(default_factory=list)
    itl_s: list[float] = field(default_factory=list)
    output_tokens: int | None = None
    prompt_tokens: int | None = None
    ok: bool = False
    status: int | None = None
    error: str | None = None
    finished_at: float | None = None
    request_class: str | None = None
    requested_output_tokens: int | None = None
    content_reads: int | None = None  # distinct socket reads that carried content chunks
    read_lag_s: float | None = None  # the client's worst event-loop lag while it was in flight
    cached_prompt_tokens: int | None = None  # prompt tokens the server found cached, if told

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return asdict(self)


class StreamError(Exception):
    """A stream that broke the protocol or reported an error."""


class SSEParser:
    """Incremental Server-Sent Events parser returning the ``data`` of complete events."""

    def __init__(self, max_bytes: int | None = None) -> None:
        self._buffer = b""
        self._data_lines: list[str] = []
        self._event_bytes = 0
        self._max_bytes, self._total_bytes = max_bytes, 0

    def feed(self, data: bytes) -> list[str]:
        """Add received bytes; return the data of every event they complete."""
        self._total_bytes += len(data)
        if self._max_bytes is not None and self._total_bytes > self._max_bytes:
            raise StreamError(f"the stream ran over {self._max_bytes} bytes (decoded), more "
                              "than its request can produce")
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        if len(self._buffer) > MAX_SSE_LINE_BYTES:
            raise StreamError(f"an SSE line ran over {MAX_SSE_LINE_BYTES} bytes without a "
                               "newline")
        events: list[str] = []
        for raw_line in lines:
            self._line(raw_line.rstrip(b"\r"), events)
        return events

    def finish(self) -> list[str]:
        """Flush an event left unterminated when the stream ended."""
        events: list[str] = []
        if self._buffer.strip():
            self._line(self._buffer.rstrip(b"\r"), events)
        self._buffer = b""
        self._line(b"", events)
        return events

    def _line(self, line: bytes, events: list[str]) -> None:
        if not line:
            if self._data_lines:
                events.append("\n".join(self._data_lines))
                self._data_lines, self._event_bytes = [], 0
        elif line.startswith(b"data:"):
            value = line[5:]
            self._event_bytes += len(value) + 1
            if self._event_bytes > MAX_SSE_EVENT_BYTES:
                raise StreamError(f"an SSE event ran over {MAX_SSE_EVENT_BYTES} bytes "
                                  "without the blank line that ends it")
            self._data_lines.append(value[1:] if value.startswith(b" ") else value)
            self._data_lines[-1] = self._data_lines[-1].decode("utf-8", errors="replace")
        # Comments (":" lines) and other fields (event:, id:, retry:) carry no data.


def _is_content_chunk(choices: list, chat: bool) -> bool:
    """Whether a chunk's ``choices`` carry generated output (see the module docstring)."""
    if not chat:
        return True
    delta = choices[0].get("delta") or {}
    if not isinstance(delta, dict) or "role" not in delta:
        return True
    return bool(delta.get("content") or delta.get("reasoning_content")
                or delta.get("reasoning") or delta.get("tool_calls"))


@dataclass
class StreamState:
    """What one stream delivered so far. Every event of one socket read carries that read's
    stamp (``now_perf``): events that waited together in the socket cannot be told apart,
    so ``content_reads`` counts the distinct reads that carried content (a request whose
    content came in one read has no measurable TPOT: ``load.stats.tpot_measurable``).
    ``requested`` (the tokens asked) bounds the stream."""

    chat: bool
    sent_perf: float
    chunk_offsets_s: list[float] = field(default_factory=list)
    usage: dict | None = None
    done: bool = False
    requested: int | None = None
    content_reads: int = 0
    _last_content_read: float | None = None

    @property
    def max_bytes(self) -> int:
        """The decoded bytes this stream may carry (``stream_byte_bound``)."""
        return stream_byte_bound(self.requested)

    def handle(self, data: str, now_perf: float) -> None:
        """Apply one SSE event's data (stamped with its read's time); nothing after
        ``[DONE]`` counts."""
        if self.done:
            return
        if data.strip() == "[DONE]":
            self.done = True
            return
        try:
            event = json.loads(data)
        except ValueError:
            raise StreamError(f"malformed SSE data: {data[:ERROR_BODY_CHARS]!r}") from None
        if not isinstance(event, dict):
            raise StreamError(f"malformed SSE data: {data[:ERROR_BODY_CHARS]!r}")
        if event.get("error"):
            raise StreamError(f"error in stream: {_error_message(event)}")
        choices = event.get("choices")
        if choices is not None and not (isinstance(choices, list)
                                        and all(isinstance(c, dict) for c in choices)):
            raise StreamError(f"malformed chunk: choices is {type(choices).__name__}, "
                               "not a list of objects")
        if choices and _is_content_chunk(choices, self.chat):
            if len(self.chunk_offsets_s) >= chunk_bound(self.requested):
                raise StreamError(f"more than {chunk_bound(self.requested)} content chunks "
                                  f"for a request of at most {self.requested} tokens (one "
                                  "chunk per token expected)")
            self.chunk_offsets_s.append(now_perf - self.sent_perf)
            if now_perf != self._last_content_read:
                self.content_reads += 1
                self._last_content_read = now_perf
        if isinstance(event.get("usage"), dict):
            self.usage = event["usage"]


def _error_message(body: Any) -> str:
    """The message of an OpenAI-style error body, or the body itself, shortened."""
    if isinstance(body, dict) and body.get("error") is not None:
        error = body["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        return str(message)[:ERROR_BODY_CHARS]
    return str(body)[:ERROR_BODY_CHARS]


def api_url(base_url: str, endpoint: str) -> str:
    """``http://host:port`` or ``.../v1`` -> the full endpoint URL (``httpcall.join_url``:
    the query after the path, no user info)."""
    path = "chat/completions" if endpoint == "chat" else "completions"
    return join_url(base_url, f"/v1/{path}")


def build_payload(model: str, workload: Mapping[str, Any], prompt: Any) -> dict[str, Any]:
    """The JSON body of one streamed request (max_tokens, ignore_eos, usage included).

    ``prompt`` is text, chat messages, or a ``WorkItem`` carrying its own output length.
    ``workload.ignore_eos: false`` leaves the flag out (servers that do not know it).
    """
    output_tokens = int(workload["output_tokens"])
    tags: tuple[str, ...] = ()
    if isinstance(prompt, WorkItem):
        model, tags = prompt.model or model, prompt.tags
        prompt, output_tokens = prompt.prompt, prompt.output_tokens
    payload: dict[str, Any] = {
        "model": model,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if tags:  # a router's request tags (LiteLLM reads "tags" and does not pass them on)
        payload["tags"] = list(tags)
    if workload.get("ignore_eos", True):
        payload["ignore_eos"] = True
    if workload.get("endpoint", "completions") == "chat":
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        payload["messages"] = messages
        payload["max_completion_tokens"] = output_tokens
    else:
        payload["prompt"] = prompt
        payload["max_tokens"] = output_tokens
    return payload


async def error_text(response: aiohttp.ClientResponse) -> str:
    """The error message of a non-200 response (OpenAI error JSON or raw text), from at most
    ``ERROR_BODY_READ_BYTES`` of its body."""
    body = b""
    try:
        while len(body) < ERROR_BODY_READ_BYTES:
            chunk = await response.content.read(ERROR_BODY_READ_BYTES - len(body))
            if not chunk:
                break
            body += chunk
    except aiohttp.ClientError as exc:
        return f"(unreadable body: {type(exc).__name__})"
    text = body.decode("utf-8", errors="replace")
    try:
        return _error_message(json.loads(text))
    except ValueError:
        return text[:ERROR_BODY_CHARS] or (response.reason or "")


def check_complete(record: RequestRecord, state: StreamState) -> None:
    """Mark a 200 stream ok, or failed with the reason it is incomplete."""
    if record.error is not None:
        return
    if not state.done:
        record.error = "stream ended before [DONE]"
    elif not state.chunk_offsets_s:
        record.error = "no generated output in stream"
    elif state.usage is None:
        record.error = "no usage in stream (server ignored stream_options.include_usage)"
    else:
        record.error = usage_problem(state.usage, record.requested_output_tokens)
        record.ok = record.error is None


def usage_problem(usage: Mapping[str, Any], requested: int | None) -> str | None:
    """Why a server's ``usage`` cannot be true, or None: the one plausibility rule."""
    output = usage.get("completion_tokens")
    if not _count(output):
        return f"malformed usage: completion_tokens is {_shown(output)}, not a whole number"
    if requested is not None and output > requested:
        return (f"implausible usage: completion_tokens {_shown(output)} for a request of at "
                f"most {requested} tokens")
    if output > MAX_PLAUSIBLE_TOKENS:
        return f"implausible usage: completion_tokens {_shown(output)}"
    prompt = usage.get("prompt_tokens")
    if prompt is not None and not (_count(prompt) and prompt <= MAX_PLAUSIBLE_TOKENS):
        return f"implausible usage: prompt_tokens {_shown(prompt)}"
    return None


def _shown(value: object) -> str:
    """A count as an error shows it (a 300-digit number by its length)."""
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**15 else None
    return text[:40] if text is not None else f"a {len(str(value))}-digit number"


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def fill_timings(record: RequestRecord, state: StreamState,
                 known: Sequence[str] = ()) -> None:
    """Copy chunk timings and plausible usage into the record (partial ones too, for
    failures); scrub its error of ``known`` secrets (the credentials sent) and tokens, and of
    control characters."""
    if record.error:  # one line, no terminal control from the server (model_optimizer.shown)
        record.error = printable(redact_text(record.error, list(known)), lines=False)
    offsets = state.chunk_offsets_s
    record.chunk_offsets_s = offsets
    record.content_reads = state.content_reads
    # ITL: gaps between reads; chunks that shared a read have no gap the client could see
    record.itl_s = [later - earlier for earlier, later in zip(offsets, offsets[1:], strict=False)
                    if later > earlier]
    if offsets:
        record.ttft_s, record.e2e_s = offsets[0], offsets[-1]
    if state.usage is not None:
        output, prompt = state.usage.get("completion_tokens"), state.usage.get("prompt_tokens")
        plausible = usage_problem(state.usage, record.requested_output_tokens) is None
        record.output_tokens = output if plausible else None
        record.prompt_tokens = prompt if plausible and _count(prompt) else None
        record.cached_prompt_tokens = cached_tokens(state.usage, record.prompt_tokens)


def cached_tokens(usage: Mapping[str, Any], prompt_tokens: int | None) -> int | None:
    """``usage.prompt_tokens_details.cached_tokens`` when the server sent it (vLLM only with
    ``--enable-prompt-tokens-details``) and it is a count within the prompt; else None."""
    details = usage.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, dict) else None
    if prompt_tokens is None or not _count(cached) or cached > prompt_tokens:
        return None
    return cached
