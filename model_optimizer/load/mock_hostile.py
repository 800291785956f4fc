"""Hostile-server faults for the mock server (``MockConfig.hostile``, ``--mock-hostile``).

Each fault replaces the answer of some paths with one a broken or hostile server gives; the
other paths answer as usual. The client must end every one of them in bounded time and
memory, classified, with nothing false counted as success (docs/security.md):

- ``slow_models``, ``slow_tokenize``, ``slow_metrics``, ``slow_health``: the answer
  starts, then one byte every 0.3 s, forever (a per-read timeout never fires);
- ``endless_event``: ``data:`` lines forever, never the blank line that ends an SSE event;
- ``huge_error``: HTTP 503 with a 300 MB body;
- ``tokens_1e18``, ``tokens_1e400``: a normal stream whose ``usage`` claims that many
  completion tokens;
- ``done_first``: ``[DONE]`` first, then a normal stream;
- ``after_done``: a normal stream, then after ``[DONE]`` more chunks and a larger ``usage``;
- ``echo_key``: HTTP 400 whose error message repeats the ``Authorization`` header sent;
- ``die_mid_stream``: two chunks, then the server process exits (in a ``MockServer``
  thread, where exiting would end the test, the connection is dropped instead);
- ``chunk_flood``: 400,000 content chunks whatever was asked, then a plausible ``usage``;
- ``gzip_newlines``: ``Content-Encoding: gzip``, 2 GiB of newlines (about 2 MB on the
  wire), then a normal stream;
- ``stall_mid_chunk``: one chunk, then the start of a chunked-encoding chunk that never
  comes whole: the connection stays open and silent;
- ``retry_after``: HTTP 429 with ``Retry-After: 3600``, every time;
- ``escape_error``: HTTP 400 whose message carries terminal escape sequences and a
  Markdown code fence (``ESCAPE_MESSAGE``);
- ``tokenize_mismatch``: ``/tokenize`` and ``/detokenize`` answer after 10 ms, and never
  consistently (every id up to 4096 decodes to ``x``, every text encodes to one id);
- ``many_models``: ``/v1/models`` lists 30,000 models (about 3 MB).
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import zlib
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

GENERATION = ("/v1/completions", "/v1/chat/completions")
HUGE_ERROR_BYTES = 300 << 20
ESCAPE_MESSAGE = ("\x1b]0;pwned\x07\x1b[2J\x1b[31mred\u202eevil\r```\n# Injected heading\n"
                  "```")
FLOOD_CHUNKS = 400_000
NEWLINE_BOMB_BYTES = 2 << 30
DRIBBLE_S = 0.3  # shorter than any per-read timeout mopt ever used: only a total one ends it
_Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def _dribble(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    await response.prepare(request)
    with _gone():
        await response.write(b'{"object": "list", "data": [')
        while True:
            await asyncio.sleep(DRIBBLE_S)
            await response.write(b" ")
    return response


async def _endless_event(request: web.Request) -> web.StreamResponse:
    response = await _sse(request)
    line = b"data: " + b"x" * (64 << 10) + b"\n"
    with _gone():
        while True:
            await response.write(line)
            await asyncio.sleep(0.001)
    return response


async def _huge_error(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(status=503, headers={"Content-Type": "application/json"})
    response.content_length = HUGE_ERROR_BYTES
    await response.prepare(request)
    block = b'{"error": {"message": "' + b"x" * ((1 << 20) - 23)
    with _gone():
        for _ in range(HUGE_ERROR_BYTES // len(block)):
            await response.write(block)
        await response.write(b"x" * (HUGE_ERROR_BYTES % len(block)))
    return response


async def _retry_after(request: web.Request) -> web.StreamResponse:
    body = {"error": {"message": "rate limit exceeded", "code": 429}}
    return web.json_response(body, status=429, headers={"Retry-After": "3600"})


async def _escape_error(request: web.Request) -> web.StreamResponse:
    return web.json_response({"error": {"message": ESCAPE_MESSAGE, "code": 400}}, status=400)


async def _tokenize_mismatch(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    await asyncio.sleep(0.01)
    if request.path == "/tokenize":
        return web.json_response({"count": 1, "max_model_len": 4096, "tokens": [7]})
    if any(not isinstance(t, int) or t >= 4096 for t in body.get("tokens") or [0]):
        return web.json_response({"error": {"message": "out of vocabulary"}}, status=400)
    return web.json_response({"prompt": "x"})


async def _many_models(request: web.Request) -> web.StreamResponse:
    data = [{"id": f"model-{i:05d}-" + "x" * 80, "object": "model"} for i in range(30_000)]
    return web.json_response({"object": "list", "data": data})


async def _echo_key(request: web.Request) -> web.StreamResponse:
    sent = request.headers.get("Authorization", "(none)")
    body = {"error": {"message": f"bad request; you sent Authorization: {sent}", "code": 400}}
    return web.json_response(body, status=400)


async def _gzip_newlines(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    asked = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
    response = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream",
                                                       "Content-Encoding": "gzip"})
    await response.prepare(request)
    packer, block = zlib.compressobj(9, zlib.DEFLATED, 31), b"\n" * (1 << 20)
    with _gone():
        for _ in range(NEWLINE_BOMB_BYTES // len(block)):
            await response.write(packer.compress(block))
        tail = [f"data: {e}\n\n" for part in ("chunks", "usage:asked", "done")
                for e in _events(part, asked, request.path.endswith("chat/completions"))]
        await response.write(packer.compress("".join(tail).encode()) + packer.flush())
        await response.write_eof()
    return response


async def _stall_mid_chunk(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    asked = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
    response = await _sse(request)
    [first] = _events("chunks:1", asked, request.path.endswith("chat/completions"))
    with _gone():
        await response.write(f"data: {first}\n\n".encode())
        transport = request.transport
        if transport is not None:
            transport.write(b"100\r\ndata: {")  # a 256-byte chunk, 7 bytes of it sent
        while transport is not None and not transport.is_closing():
            await asyncio.sleep(DRIBBLE_S)
    return response


def _stream_of(*parts: str) -> _Handler:
    """An SSE answer of ``parts``: ``chunks`` (one per token asked), ``flood``
    (``FLOOD_CHUNKS``) or ``chunks:N``,
    ``usage:asked`` or ``usage:1eK`` (10**K completion tokens), ``done``, ``die``."""
    async def handler(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        asked = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
        chat = request.path.endswith("chat/completions")
        response = await _sse(request)
        with _gone():
            for part in parts:
                for event in _events(part, asked, chat):
                    await response.write(f"data: {event}\n\n".encode())
            await response.write_eof()
        return response
    return handler


def _events(part: str, asked: int, chat: bool) -> list[str]:
    if part == "done":
        return ["[DONE]"]
    if part == "die":
        if threading.current_thread() is threading.main_thread():
            os._exit(1)  # the mock runs as a process: the server dies mid-stream
        raise ConnectionResetError("mock server thread: connection dropped")
    if part.startswith("usage:"):
        claim = part.removeprefix("usage:")
        count = asked if claim == "asked" else 10 ** int(claim.removeprefix("1e"))
        usage = {"prompt_tokens": 3, "completion_tokens": count,
                 "total_tokens": count + 3}
        return [json.dumps({"id": "h", "object": "chunk", "choices": [], "usage": usage})]
    number = {"chunks": asked, "flood": FLOOD_CHUNKS}.get(part) or int(part.split(":")[1])
    choice: dict[str, Any] = ({"index": 0, "delta": {"content": " tok"}} if chat
                              else {"index": 0, "text": " tok"})
    return [json.dumps({"id": "h", "object": "chunk", "choices": [choice]})] * number


async def _sse(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    return response


class _gone:
    """Stop quietly when the client went away (what a hostile server does not care about)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type | None, *_: object) -> bool:
        return kind is not None and issubclass(kind, (ConnectionError, RuntimeError))


FAULTS: dict[str, tuple[tuple[str, ...], _Handler]] = {
    "slow_models": (("/v1/models",), _dribble),
    "slow_tokenize": (("/tokenize", "/detokenize"), _dribble),
    "slow_metrics": (("/metrics",), _dribble),
    "slow_health": (("/health",), _dribble),
    "endless_event": (GENERATION, _endless_event),
    "huge_error": (GENERATION, _huge_error),
    "tokens_1e18": (GENERATION, _stream_of("chunks", "usage:1e18", "done")),
    "tokens_1e400": (GENERATION, _stream_of("chunks", "usage:1e400", "done")),
    "done_first": (GENERATION, _stream_of("done", "chunks", "usage:asked", "done")),
    "after_done": (GENERATION, _stream_of("chunks", "usage:asked", "done", "chunks",
                                          "usage:1e6", "done")),
    "echo_key": (GENERATION, _echo_key),
    "die_mid_stream": (GENERATION, _stream_of("chunks:2", "die")),
    "chunk_flood": (GENERATION, _stream_of("flood", "usage:asked", "done")),
    "gzip_newlines": (GENERATION, _gzip_newlines),
    "stall_mid_chunk": (GENERATION, _stall_mid_chunk),
    "retry_after": (GENERATION, _retry_after),
    "escape_error": (GENERATION, _escape_error),
    "tokenize_mismatch": (("/tokenize", "/detokenize"), _tokenize_mismatch),
    "many_models": (("/v1/models",), _many_models),
}


def middleware(fault: str) -> Any:
    """An aiohttp middleware answering ``fault``'s paths the hostile way."""
    if fault not in FAULTS:
        raise ValueError(f"unknown hostile fault {fault!r}; known: {', '.join(FAULTS)}")
    paths, hostile = FAULTS[fault]

    @web.middleware
    async def answer(request: web.Request, handler: _Handler) -> web.StreamResponse:
        return await (hostile(request) if request.path in paths else handler(request))
    return answer
