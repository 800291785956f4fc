"""An OpenAI-compatible streaming mock server for tests and client benchmarks.

It answers like vLLM's OpenAI server, with timings set by configuration instead of a model:

- ``POST /v1/completions`` and ``POST /v1/chat/completions`` (streamed or not),
- ``GET /health``, ``GET /v1/models``, ``GET /metrics`` (a few ``vllm:*`` Prometheus series),
- ``POST /tokenize`` and ``/detokenize`` over a word vocabulary (``mock_tokenize``; off with
  ``tokenize_endpoint=False``, like a server that has none).

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
Hostile-server faults (for hardening tests): ``redirect_to`` answers ``/v1/models`` and every
generation request with a 307 to that URL; ``malformed_choices_every_n`` sends a chunk whose
``choices`` is an object; ``string_usage`` reports ``completion_tokens`` as a string;
``no_newlines`` streams chunks that never end a line (the SSE buffer must stay bounded);
``hostile`` names one fault of ``mock_hostile.FAULTS`` (``--mock-hostile``).

Prefix caching (``mock_prefix``, on by default like vLLM's; ``--no-enable-prefix-caching``
turns it off): ``vllm:prefix_cache_queries_total`` / ``_hits_total`` in ``/metrics``, and
with ``prompt_tokens_details`` (``--enable-prompt-tokens-details``) each ``usage`` carries
``prompt_tokens_details.cached_tokens``.

Batching: with ``max_num_seqs`` set, at most that many requests generate at once and the rest
wait (``vllm:num_requests_waiting``); a request's clock starts when it is admitted, so
throughput grows with the batch up to ``max_num_seqs`` and then plateaus, like an engine.
``capacity`` caps the batch whatever ``max_num_seqs`` says (the hardware's limit), so a
``max_num_seqs`` sweep finds a knee there.

Use it in a background thread (``with MockServer(ttft_s=0.05, itl_s=0.01) as server:
server.url``) or as a process: ``python -m model_optimizer.load.mock_server --port 8000``.
As a process it accepts vLLM's server flags (``--model DIR --served-model-name NAME --host
--port --max-num-seqs ...``; the ones it does not model are ignored), so it can stand in as the
engine process mopt supervises (``engine.factory.MockEngine``), with engine-like faults:
``--mock-startup-s`` (health answers after a delay), ``--mock-fail-start TEXT`` (print TEXT
as the log and exit 1 before serving), ``--mock-die-after N`` (exit after the N-th request
arrives) and ``--mock-engine-core group|setsid`` (start a child process, like vLLM's engine
core, in the server's process group or in a session of its own).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

from aiohttp import web

from model_optimizer.load import mock_hostile, mock_tokenize
from model_optimizer.load.mock_answer import Job, count_prompt_tokens, error_body
from model_optimizer.load.mock_prefix import PrefixCache

_TOKENIZE_PATHS = ("/tokenize", "/detokenize")  # guarded too: stricter than vLLM's /v1 only


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
    hostile: str | None = None        # a fault of mock_hostile.FAULTS
    max_num_seqs: int = 0             # 0: no batch limit
    capacity: int = 0                 # most requests the "hardware" runs at once (0: no limit)
    die_after_n: int = 0              # exit the process when request n arrives (0: never)
    api_key: str | None = None  # when set, /v1/* and /(de)tokenize need "Bearer <api_key>"
    tokenize_endpoint: bool = True    # serve /tokenize and /detokenize
    vocab_size: int = 512             # of the mock's word tokenizer
    bos_token: bool = False           # completions prompts get <s> (counted in usage)
    prefix_caching: bool = True       # vLLM's default (mock_prefix); counted in /metrics
    prompt_tokens_details: bool = False  # usage.prompt_tokens_details.cached_tokens
    answers: dict[str, str] = field(default_factory=dict)  # prompt -> scripted answer text


@dataclass
class MockCounters:
    """What the server has seen; read by ``/metrics`` and by tests."""

    requests: int = 0
    running: int = 0
    waiting: int = 0
    succeeded: int = 0
    prompt_tokens: int = 0
    generation_tokens: int = 0
    payloads: list[dict] = field(default_factory=list)
    tokenize_calls: int = 0


class MockApp:
    """The request handlers over one config and one set of counters."""

    def __init__(self, config: MockConfig) -> None:
        self.config = config
        self.counters = MockCounters()
        self.prefix_cache = PrefixCache(config.prefix_caching)
        self._batch: asyncio.Semaphore | None = None

    def build(self) -> web.Application:
        """The aiohttp application with every route."""
        middlewares = [self._check_key] if self.config.api_key else []
        if self.config.hostile:
            middlewares.append(mock_hostile.middleware(self.config.hostile))
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=middlewares)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/chat/completions", self.chat_completions)
        app.router.add_get("/health", self.health)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics)
        if self.config.tokenize_endpoint:
            app.router.add_post("/tokenize", self.tokenize)
            app.router.add_post("/detokenize", self.detokenize)
        return app

    async def tokenize(self, request: web.Request) -> web.Response:
        self.counters.tokenize_calls += 1
        return await mock_tokenize.tokenize(request, self.config)

    async def detokenize(self, request: web.Request) -> web.Response:
        self.counters.tokenize_calls += 1
        return await mock_tokenize.detokenize(request, self.config)

    @web.middleware
    async def _check_key(self, request: web.Request, handler: Any) -> web.StreamResponse:
        guarded = request.path.startswith("/v1/") or request.path in _TOKENIZE_PATHS
        if guarded and \
                request.headers.get("Authorization") != f"Bearer {self.config.api_key}":
            return web.json_response(error_body("invalid API key", 401), status=401)
        return await handler(request)

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    async def models(self, request: web.Request) -> web.Response:
        if self.config.redirect_to:
            raise web.HTTPTemporaryRedirect(self.config.redirect_to)
        model = {"id": self.config.model, "object": "model", "created": 0, "owned_by": "mopt",
                 "root": self.config.model, "max_model_len": 1 << 20}
        return web.json_response({"object": "list", "data": [model]})

    async def metrics(self, request: web.Request) -> web.Response:
        labels = f'{{engine="0",model_name="{self.config.model}"}}'
        counters = self.counters
        series = [
            ("num_requests_running", "gauge", "", counters.running),
            ("num_requests_waiting", "gauge", "", counters.waiting),
            ("kv_cache_usage_perc", "gauge", "", min(1.0, counters.running / 100.0)),
            ("num_preemptions", "counter", "_total", 0),
            ("prompt_tokens", "counter", "_total", counters.prompt_tokens),
            ("generation_tokens", "counter", "_total", counters.generation_tokens),
            ("request_success", "counter", "_total", counters.succeeded),
            ("prefix_cache_queries", "counter", "_total", self.prefix_cache.queries),
            ("prefix_cache_hits", "counter", "_total", self.prefix_cache.hits),
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
        arrived = asyncio.get_running_loop().time()
        try:
            body = await request.json()
        except ValueError:
            return web.json_response(error_body("body is not JSON", 400), status=400)
        self.counters.requests += 1
        number = self.counters.requests
        self.counters.payloads.append(body)
        config = self.config
        if config.die_after_n and number >= config.die_after_n:
            print(f"mock engine: EngineDeadError injected at request {number}", flush=True)
            os._exit(1)
        if body.get("model") not in (None, config.model):
            message = f"The model `{body.get('model')}` does not exist."
            return web.json_response(error_body(message, 404), status=404)
        if config.redirect_to:
            raise web.HTTPTemporaryRedirect(config.redirect_to)
        if config.fail_every_n and number % config.fail_every_n == 0:
            message = f"injected failure on request {number}"
            return web.json_response(error_body(message, config.fail_status),
                                     status=config.fail_status)
        async with self._admitted(arrived) as started:
            job = Job(self, request, body, chat, number, started)
            try:
                return await (job.stream() if body.get("stream") else job.whole())
            except ConnectionError:  # the client went away mid-answer
                return job.response or web.Response(status=499)

    @contextlib.asynccontextmanager
    async def _admitted(self, arrived: float):
        """Hold one of ``max_num_seqs`` batch slots (waiting for one) while generating; yields
        when the request's clock starts (its arrival, or its admission after a wait)."""
        limits = [n for n in (self.config.max_num_seqs, self.config.capacity) if n]
        if limits and self._batch is None:
            self._batch = asyncio.Semaphore(min(limits))
        started = arrived
        if self._batch is not None:
            self.counters.waiting += 1
            try:
                waits = self._batch.locked()
                await self._batch.acquire()
                started = asyncio.get_running_loop().time() if waits else arrived
            finally:
                self.counters.waiting -= 1
        self.counters.running += 1
        try:
            yield started
        finally:
            self.counters.running -= 1
            if self._batch is not None:
                self._batch.release()


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

    @contextlib.asynccontextmanager
    async def in_this_loop(self):
        """Serve in the running event loop instead of a thread: a test that fast-forwards its
        loop's clock runs the server and the client on it, so the injected delays are the
        only time that passes (``async with MockServer(...).in_this_loop() as server``)."""
        runner = self._app_runner()
        await runner.setup()
        await web.SockSite(runner, self._socket).start()
        try:
            yield self
        finally:
            await runner.cleanup()

    def _app_runner(self) -> web.AppRunner:
        app = self.mock.build()
        app[MOCK_APP_KEY] = self.mock
        return web.AppRunner(app, access_log=None, shutdown_timeout=0.1)

    def _serve(self) -> None:
        self._loop = asyncio.new_event_loop()
        try:
            self._runner = self._app_runner()
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
    """The mock's own flags and vLLM's server flags it models; other vLLM flags are ignored."""
    parser = argparse.ArgumentParser(description="mopt's OpenAI-compatible mock server",
                                     allow_abbrev=False)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default=MockConfig.model)
    parser.add_argument("--served-model-name", default=None)
    parser.add_argument("--max-num-seqs", type=int, default=0)
    parser.add_argument("--ttft-ms", type=float, default=0.0)
    parser.add_argument("--itl-ms", type=float, default=0.0)
    parser.add_argument("--tokens-per-chunk", type=int, default=1)
    parser.add_argument("--fail-every", type=int, default=0, help="HTTP error every Nth request")
    parser.add_argument("--fail-status", type=int, default=500)
    parser.add_argument("--drop-every", type=int, default=0, help="drop every Nth stream")
    parser.add_argument("--mock-startup-s", type=float, default=0.0)
    parser.add_argument("--mock-fail-start", default=None)
    parser.add_argument("--mock-die-after", type=int, default=0)
    parser.add_argument("--mock-capacity", type=int, default=0)
    parser.add_argument("--mock-answers", default=None,
                        help="JSON file {prompt: answer}: scripted non-streamed answers")
    parser.add_argument("--mock-hostile", choices=tuple(mock_hostile.FAULTS), default=None)
    parser.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction,
                        default=True)
    parser.add_argument("--enable-prompt-tokens-details", action="store_true")
    parser.add_argument("--mock-engine-core", choices=("none", "group", "setsid"),
                        default="none")
    args, _ignored = parser.parse_known_args(argv)
    return args


def _answers(path: str | None) -> dict[str, str]:
    if not path:
        return {}
    with open(path, encoding="utf-8") as handle:
        return {str(k): str(v) for k, v in json.load(handle).items()}


def start_engine_core(mode: str) -> subprocess.Popen | None:
    """A child process standing in for vLLM's engine core (it sleeps until killed)."""
    if mode == "none":
        return None
    code = "import time\nwhile True: time.sleep(1)"
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=mode == "setsid",
                            stdin=subprocess.DEVNULL)


def main(argv: list[str] | None = None) -> None:
    """Serve the mock in the foreground until interrupted."""
    args = _parse_args(argv)
    if args.mock_fail_start:
        print(args.mock_fail_start, flush=True)
        sys.exit(1)
    config = MockConfig(model=args.served_model_name or args.model,
                        ttft_s=args.ttft_ms / 1000.0, itl_s=args.itl_ms / 1000.0,
                        tokens_per_chunk=args.tokens_per_chunk, fail_every_n=args.fail_every,
                        fail_status=args.fail_status, drop_every_n=args.drop_every,
                        max_num_seqs=args.max_num_seqs, capacity=args.mock_capacity,
                        die_after_n=args.mock_die_after, hostile=args.mock_hostile,
                        prefix_caching=args.enable_prefix_caching,
                        prompt_tokens_details=args.enable_prompt_tokens_details,
                        answers=_answers(args.mock_answers))
    core = start_engine_core(args.mock_engine_core)
    if core is not None:
        print(f"mock engine core pid {core.pid} ({args.mock_engine_core})", flush=True)
    time.sleep(args.mock_startup_s)
    print(f"mock OpenAI server for model {config.model!r} on http://{args.host}:{args.port}",
          flush=True)
    web.run_app(create_app(config), host=args.host, port=args.port, access_log=None,
                print=None)


__all__ = ["MockConfig", "MockCounters", "MockServer", "count_prompt_tokens", "create_app",
           "main"]

if __name__ == "__main__":
    main()
