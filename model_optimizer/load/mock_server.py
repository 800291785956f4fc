"""An OpenAI-compatible streaming mock server for tests and client benchmarks.

It answers like vLLM's OpenAI server, with timings set by configuration instead of a model:

- ``POST /v1/completions`` and ``POST /v1/chat/completions`` (streamed or not),
- ``GET /health``, ``GET /v1/models``, ``GET /metrics`` (a few ``vllm:*`` Prometheus series).

Timing: generated token ``j`` (0-based) is ready ``ttft_s + j * itl_s`` after the request
arrived; a chunk carries ``tokens_per_chunk`` tokens and is sent when its last token is ready.
With one token per chunk the client sees TTFT = ``ttft_s`` and ITL = TPOT = ``itl_s`` (plus
scheduling jitter). Chat streams start with a role chunk, like vLLM's.
Output length is ``max_tokens`` (or ``max_completion_tokens``; default 16): the mock behaves
as if ``ignore_eos`` were always set.

``usage`` (sent as a final chunk with empty ``choices`` when ``stream_options.include_usage``
is true, and always in non-streamed answers): ``completion_tokens`` is the number of generated
tokens; ``prompt_tokens`` is the length of a token-id list prompt, or else the number of
whitespace-separated words of the prompt (chat: of all message texts).

Failure injection counts requests to the two generation endpoints from 1 in arrival order:
every ``fail_every_n``-th gets HTTP ``fail_status`` with an OpenAI error body, every
``drop_every_n``-th has its connection dropped after ``drop_after_chunks`` chunks, every
``stream_error_every_n``-th gets an ``error`` event after its first chunk (then ``[DONE]``).
Hostile-server faults (for hardening tests): ``redirect_to`` answers every generation
request with a 307 to that URL; ``malformed_choices_every_n`` sends a chunk whose
``choices`` is an object; ``string_usage`` reports ``completion_tokens`` as a string;
``no_newlines`` streams chunks that never end a line (the SSE buffer must stay bounded).

Use it in a background thread (``with MockServer(ttft_s=0.05, itl_s=0.01) as server:
server.url``) or as a process: ``python -m model_optimizer.load.mock_server --port 8000``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class MockConfig:
    """Behaviour of the mock server (times in seconds)."""

    model: str = "mock-model"
    ttft_s: float = 0.0
    itl_s: float = 0.0
    tokens_per_chunk: int = 1
    default_max_tokens: int = 16
    fail_every_n: int = 0
    fail_status: int = 500
    drop_every_n: int = 0
    drop_after_chunks: int = 1
    stream_error_every_n: int = 0
    redirect_to: str | None = None
    malformed_choices_every_n: int = 0
    string_usage: bool = False
    no_newlines: bool = False


@dataclass
class MockCounters:
    """What the server has seen; read by ``/metrics`` and by tests."""

    requests: int = 0
    running: int = 0
    succeeded: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    payloads: list[dict] = field(default_factory=list)


def count_prompt_tokens(body: dict[str, Any]) -> int:
    """The mock's prompt length: token ids counted, else whitespace-separated words."""
    if "messages" in body:
        return sum(_message_words(message) for message in body.get("messages") or [])
    prompt = body.get("prompt", "")
    if isinstance(prompt, list):
        if all(isinstance(item, int) for item in prompt):
            return len(prompt)
        return sum(len(str(item).split()) for item in prompt)
    return len(str(prompt).split())


def _message_words(message: dict[str, Any]) -> int:
    content = message.get("content") or ""
    if isinstance(content, list):
        content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return len(str(content).split())


def _error_body(message: str, status: int) -> dict[str, Any]:
    return {"error": {"message": message, "type": "MockError", "param": None, "code": status}}


def _chunk_ranges(output_tokens: int, per_chunk: int) -> list[tuple[int, int]]:
    """``(first, end)`` token index ranges of each chunk."""
    return [(first, min(first + per_chunk, output_tokens))
            for first in range(0, output_tokens, per_chunk)]


def _token_text(first: int, end: int) -> str:
    return "".join(f" t{index}" for index in range(first, end))


class MockApp:
    """The request handlers over one config and one set of counters."""

    def __init__(self, config: MockConfig) -> None:
        self.config = config
        self.counters = MockCounters()

    def build(self) -> web.Application:
        """The aiohttp application with every route."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics)
        return app

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def models(self, request: web.Request) -> web.Response:
        model = {"id": self.config.model, "object": "model", "created": 0, "owned_by": "mopt",
                 "root": self.config.model, "max_model_len": 1 << 20}
        return web.json_response({"object": "list", "data": [model]})

    async def metrics(self, request: web.Request) -> web.Response:
        labels = f'{{engine="0",model_name="{self.config.model}"}}'
        counters = self.counters
        series = [
            ("num_requests_running", "gauge", "", counters.running),
            ("num_requests_waiting", "gauge", "", 0),
            ("kv_cache_usage_perc", "gauge", "", min(1.0, counters.running / 100.0)),
            ("num_preemptions", "counter", "_total", 0),
            ("prompt_tokens", "counter", "_total", counters.prompt_tokens),
            ("generation_tokens", "counter", "_total", counters.generation_tokens),
            ("request_success", "counter", "_total", counters.succeeded),
        ]
        lines = []
        for name, kind, suffix, value in series:
            lines += [f"# HELP vllm:{name} mock {name}.", f"# TYPE vllm:{name} {kind}",
                      f"vllm:{name}{suffix}{labels} {float(value)}"]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        arrived = time.perf_counter()
        try:
            body = await request.json()
        except ValueError:
            return web.json_response(_error_body("body is not JSON", 400), status=400)
        self.counters.requests += 1
        number = self.counters.requests
        self.counters.payloads.append(body)
        config = self.config
        if body.get("model") not in (None, config.model):
            message = f"The model `{body.get('model')}` does not exist."
            return web.json_response(_error_body(message, 404), status=404)
        if config.redirect_to:
            raise web.HTTPTemporaryRedirect(config.redirect_to)
        if config.fail_every_n and number % config.fail_every_n == 0:
            message = f"injected failure on request {number}"
            return web.json_response(_error_body(message, config.fail_status),
                                     status=config.fail_status)
        self.counters.running += 1
        job = _Job(self, request, body, chat, number, arrived)
        try:
            return await (job.stream() if body.get("stream") else job.whole())
        except ConnectionError:  # the client went away mid-answer
            return job.response or web.Response(status=499)
        finally:
            self.counters.running -= 1


class _Job:
    """One generation request being answered."""

    def __init__(self, app: MockApp, request: web.Request, body: dict, chat: bool,
                 number: int, arrived: float) -> None:
        self.app, self.config, self.request, self.body = app, app.config, request, body
        self.chat, self.number, self.arrived = chat, number, arrived
        self.output_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens")
                                 or self.config.default_max_tokens)
        self.prompt_tokens = count_prompt_tokens(body)
        self.request_id = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:16]}"
        self.response: web.StreamResponse | None = None
        self.created = int(time.time())

    def _envelope(self, choices: list, **extra: Any) -> dict[str, Any]:
        kind = "chat.completion.chunk" if self.chat else "text_completion"
        return {"id": self.request_id, "object": kind, "created": self.created,
                "model": self.config.model, "choices": choices, **extra}

    def _choice(self, text: str, finish_reason: str | None) -> dict[str, Any]:
        if self.chat:
            return {"index": 0, "delta": {"content": text}, "logprobs": None,
                    "finish_reason": finish_reason}
        return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason,
                "stop_reason": None}

    def _usage(self) -> dict[str, Any]:
        completion = str(self.output_tokens) if self.config.string_usage else self.output_tokens
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": completion,
                "total_tokens": self.prompt_tokens + self.output_tokens}

    def _ready_at(self, token_index: int) -> float:
        return self.arrived + self.config.ttft_s + token_index * self.config.itl_s

    def _count_success(self) -> None:
        counters = self.app.counters
        counters.succeeded += 1
        counters.prompt_tokens += self.prompt_tokens
        counters.generation_tokens += self.output_tokens

    async def whole(self) -> web.Response:
        """A non-streamed answer after the full generation time."""
        await _sleep_until(self._ready_at(self.output_tokens - 1))
        text = _token_text(0, self.output_tokens)
        if self.chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text},
                      "finish_reason": "length"}
        else:
            choice = {"index": 0, "text": text, "finish_reason": "length"}
        self._count_success()
        body = self._envelope([choice], usage=self._usage())
        body["object"] = "chat.completion" if self.chat else "text_completion"
        return web.json_response(body)

    async def stream(self) -> web.StreamResponse:
        """A streamed answer, with the injected faults of this request number."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        self.response = response
        await response.prepare(self.request)
        if self.chat:
            role = {"index": 0, "delta": {"role": "assistant", "content": ""},
                    "logprobs": None, "finish_reason": None}
            await _send_event(response, self._envelope([role]))
        config = self.config
        drop = bool(config.drop_every_n) and self.number % config.drop_every_n == 0
        stream_error = (bool(config.stream_error_every_n)
                        and self.number % config.stream_error_every_n == 0)
        ranges = _chunk_ranges(self.output_tokens, max(1, config.tokens_per_chunk))
        if config.no_newlines:
            return await self._endless_line(response)
        malformed = (bool(config.malformed_choices_every_n)
                     and self.number % config.malformed_choices_every_n == 0)
        if malformed:
            await _send_event(response, self._envelope({"0": {"text": "x"}}))  # type: ignore[arg-type]
        for chunk_index, (first, end) in enumerate(ranges):
            if drop and chunk_index >= config.drop_after_chunks:
                self.request.transport.abort()  # the client sees a truncated stream
                return response
            if stream_error and chunk_index == 1:
                await _send_event(response, _error_body("injected stream error", 500))
                break
            await _sleep_until(self._ready_at(end - 1))
            finish_reason = "length" if end == self.output_tokens else None
            await _send_event(response, self._envelope([self._choice(
                _token_text(first, end), finish_reason)]))
        else:
            self._count_success()
            options = self.body.get("stream_options") or {}
            if options.get("include_usage"):
                await _send_event(response, self._envelope([], usage=self._usage()))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


    async def _endless_line(self, response: web.StreamResponse) -> web.StreamResponse:
        """``data: xxxx...`` without a newline until the client gives up (bounded here too)."""
        for _ in range(64):  # 64 x 64 KiB = 4 MiB, past the client's 1 MiB line limit
            await response.write(b"data: " + b"x" * 65536)
        await response.write_eof()
        return response


async def _send_event(response: web.StreamResponse, event: dict[str, Any]) -> None:
    await response.write(b"data: " + json.dumps(event).encode() + b"\n\n")


async def _sleep_until(perf_target: float) -> None:
    delay = perf_target - time.perf_counter()
    if delay > 0:
        await asyncio.sleep(delay)


MOCK_APP_KEY = web.AppKey("mock", MockApp)


def create_app(config: MockConfig | None = None) -> web.Application:
    """An aiohttp application serving the mock API (``app[MOCK_APP_KEY]`` is its MockApp)."""
    mock = MockApp(config or MockConfig())
    app = mock.build()
    app[MOCK_APP_KEY] = mock
    return app


class MockServer:
    """The mock server on 127.0.0.1 and a free port, in a background thread.

    ``MockServer(config)`` or ``MockServer(ttft_s=0.05, itl_s=0.01, ...)`` (MockConfig
    fields); use as a context manager, then ``server.url`` (``http://127.0.0.1:PORT``).
    """

    def __init__(self, config: MockConfig | None = None, **overrides: Any) -> None:
        self.config = replace(config or MockConfig(), **overrides)
        self.mock = MockApp(self.config)
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port: int = self._socket.getsockname()[1]
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None

    @property
    def url(self) -> str:
        """Base URL of the server (append ``/v1/...``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def counters(self) -> MockCounters:
        """Requests seen, running, succeeded, token totals and the received payloads."""
        return self.mock.counters

    def start(self) -> MockServer:
        """Start serving; return once the socket accepts connections."""
        self._thread = threading.Thread(target=self._serve, name="mopt-mock-server", daemon=True)
        self._thread.start()
        self._ready.wait(timeout=30)
        if self._start_error is not None:
            raise RuntimeError("mock server failed to start") from self._start_error
        return self

    def stop(self) -> None:
        """Stop serving and join the thread (in-flight streams are cut)."""
        if self._loop is None or self._thread is None:
            return
        if self._runner is not None:
            future = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop)
            with contextlib.suppress(Exception):
                future.result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._thread = None

    def _serve(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            app = self.mock.build()
            app[MOCK_APP_KEY] = self.mock
            self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.1)
            self._loop.run_until_complete(self._runner.setup())
            site = web.SockSite(self._runner, self._socket)
            self._loop.run_until_complete(site.start())
        except BaseException as exc:  # reported by start()
            self._start_error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._cancel_pending()
            self._loop.close()

    def _cancel_pending(self) -> None:
        """Cancel handlers still running (a stream cut by stop()) so none is left pending."""
        assert self._loop is not None
        pending = asyncio.all_tasks(self._loop)
        for task in pending:
            task.cancel()
        if pending:
            self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))

    def __enter__(self) -> MockServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="mopt's OpenAI-compatible mock server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default=MockConfig.model)
    parser.add_argument("--ttft-ms", type=float, default=0.0)
    parser.add_argument("--itl-ms", type=float, default=0.0)
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument("--fail-every", type=int, default=0, help="HTTP error every Nth request")
    parser.add_argument("--fail-status", type=int, default=500)
    parser.add_argument("--drop-every", type=int, default=0, help="drop every Nth stream")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Serve the mock in the foreground until interrupted."""
    args = _parse_args(argv)
    config = MockConfig(model=args.model, ttft_s=args.ttft_ms / 1000.0,
                        itl_s=args.itl_ms / 1000.0, tokens_per_chunk=args.tokens_per_chunk,
                        fail_every_n=args.fail_every, fail_status=args.fail_status,
                        drop_every_n=args.drop_every)
    print(f"mock OpenAI server for model {config.model!r} on http://{args.host}:{args.port}",
          flush=True)
    web.run_app(create_app(config), host=args.host, port=args.port, access_log=None,
                print=None)


__all__ = ["MockConfig", "MockCounters", "MockServer", "count_prompt_tokens", "create_app",
           "main"]

if __name__ == "__main__":
    main()
