"""Fixtures for the telemetry tests: the /metrics fixtures and a tiny local HTTP server."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

DATA_DIR = Path(__file__).resolve().parents[2] / "data"


@dataclass
class MetricsServerState:
    """What the fake server answers: a status code and a body made per request."""

    status: int = 200
    body: Callable[[], str] = lambda: ""
    delay_s: float = 0.0
    requests: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class MetricsServer:
    """A running fake server: its /metrics URL and the state to change its answers."""

    url: str
    state: MetricsServerState


def _handler_for(state: MetricsServerState) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            with state.lock:
                state.requests += 1
            if state.delay_s:
                threading.Event().wait(state.delay_s)
            payload = state.body().encode() if state.status == 200 else b"internal error"
            self.send_response(state.status)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            """Keep test output quiet."""

    return Handler


@pytest.fixture
def metrics_server() -> Iterator[MetricsServer]:
    """A stdlib HTTP server on 127.0.0.1 (random port) in a thread, serving /metrics."""
    state = MetricsServerState()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield MetricsServer(url=f"http://127.0.0.1:{server.server_address[1]}/metrics", state=state)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def closed_port_url() -> str:
    """A /metrics URL on a local port nothing listens on."""
    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        port = probe_socket.getsockname()[1]
    return f"http://127.0.0.1:{port}/metrics"


@pytest.fixture
def sample_metrics_text() -> str:
    """vLLM /metrics under load (rendered by vLLM's own Prometheus logger; see file header)."""
    return (DATA_DIR / "vllm_metrics_sample.txt").read_text()


@pytest.fixture
def idle_metrics_text() -> str:
    """A real scrape of an idle vLLM CPU server serving the tiny model."""
    return (DATA_DIR / "vllm_metrics_real_idle.txt").read_text()
