"""Every synchronous call to a server has a total deadline and a bounded read
(``model_optimizer.httpcall``), whoever makes it: /v1/models, the tokenizer, /metrics,
/health. The hostile servers dribble one byte a second forever."""

from __future__ import annotations

import base64
import time

import pytest

from model_optimizer.engine.supervisor import EngineProcess
from model_optimizer.errors import UsageError
from model_optimizer.httpcall import HTTPCallError, basic_auth_header, call, join_url
from model_optimizer.load.mock_server import MockServer
from model_optimizer.load.server_tokenizer import ServerTokenizer
from model_optimizer.telemetry.prometheus import scrape
from model_optimizer.usecase import endpoint


@pytest.mark.parametrize(("base", "joined"), [
    ("http://h:1", "http://h:1/v1/models"),
    ("http://h:1/", "http://h:1/v1/models"),
    ("http://h:1/v1", "http://h:1/v1/models"),
    ("http://h:1/v1/", "http://h:1/v1/models"),
    ("http://alice:pw@h:1/?api_key=qk", "http://h:1/v1/models?api_key=qk"),
    ("https://h/prefix/v1?a=1&b=2", "https://h/prefix/v1/models?a=1&b=2"),
])
def test_join_url_puts_the_path_before_the_query_and_drops_user_info(base, joined):
    assert join_url(base, "/v1/models") == joined


def test_user_info_becomes_a_basic_header():
    header = basic_auth_header("http://al%40ice:p%3Aw@h:1/")["Authorization"]
    assert base64.b64decode(header.removeprefix("Basic ")) == b"al@ice:p:w"
    assert basic_auth_header("http://h:1/") == {}


def _within(seconds: float, started: float) -> None:
    assert time.monotonic() - started < seconds


def test_a_dribbling_answer_ends_at_the_total_deadline():
    with MockServer(hostile="slow_models") as server:
        started = time.monotonic()
        with pytest.raises(HTTPCallError, match="within 1.5 s"):
            call("GET", f"{server.url}/v1/models", deadline_s=1.5)
        _within(4, started)


def test_a_huge_body_is_read_only_up_to_max_bytes():
    with MockServer(hostile="huge_error") as server:
        reply = call("POST", f"{server.url}/v1/completions", json_body={"prompt": "x"},
                     deadline_s=10, max_bytes=1000)
    assert reply.status == 503 and reply.truncated and len(reply.body) == 1000
    with pytest.raises(ValueError, match="larger than"):
        reply.json()


def test_models_listing_has_a_total_deadline(monkeypatch):
    monkeypatch.setattr(endpoint, "MODELS_DEADLINE_S", 1.0)
    with MockServer(hostile="slow_models") as server:
        started = time.monotonic()
        with pytest.raises(UsageError, match="no complete answer within 1 s"):
            endpoint.served_models(server.url)
        _within(4, started)


def test_tokenizer_calls_have_a_total_deadline():
    with MockServer(hostile="slow_tokenize") as server:
        started = time.monotonic()
        with pytest.raises(UsageError, match="did not answer"):
            ServerTokenizer(server.url, "mock-model", timeout_s=1.0)
        _within(4, started)


def test_metrics_scrapes_have_a_total_deadline():
    with MockServer(hostile="slow_metrics") as server:
        started = time.monotonic()
        assert scrape(f"{server.url}/metrics", timeout_s=1.0) is None
        _within(4, started)
    with MockServer() as server:
        assert scrape(f"{server.url}/metrics", timeout_s=1.0)["num_requests_running"] == 0


def test_health_checks_have_a_total_deadline(tmp_path, monkeypatch):
    monkeypatch.setattr("model_optimizer.engine.supervisor.HEALTH_DEADLINE_S", 1.0)
    with MockServer(hostile="slow_health") as server:
        engine = EngineProcess([], {}, tmp_path / "log", server.url)
        started = time.monotonic()
        assert engine._healthy() is False
        _within(4, started)
    with MockServer() as server:
        assert EngineProcess([], {}, tmp_path / "log", server.url)._healthy() is True


def test_a_refused_connection_is_an_httpcall_error():
    with pytest.raises(HTTPCallError, match="ConnectionRefused"):
        call("GET", "http://127.0.0.1:9/health", deadline_s=2)
    with pytest.raises(HTTPCallError, match="not an http"):
        call("GET", "file:///etc/passwd", deadline_s=2)
