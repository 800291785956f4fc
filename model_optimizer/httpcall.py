"""Plain HTTP calls to a server mopt does not trust: the one home of total deadlines,
bounded reads and URL joining.

A lowest layer (imports nothing of mopt). Every synchronous call mopt makes to a server
(``/v1/models``, ``/tokenize`` and ``/detokenize``, ``/metrics`` scrapes, ``/health``
checks) goes through ``call``:

- a **total deadline**: connecting, the status line, the headers and the body together
  finish within ``deadline_s`` or the call fails (a watchdog shuts the socket down, so a
  server that sends one byte a second cannot stretch a call; a per-read timeout, like
  requests' ``timeout=``, would wait forever);
- a **bounded read**: at most ``max_bytes`` of body are kept (``Reply.truncated`` says the
  server sent more);
- no proxy from the environment, no redirect followed, no cookies kept.

``join_url`` is the one rule for putting a path on a ``--url``: ``http://h:p``,
``http://h:p/``, ``http://h:p/v1`` and ``http://u:pw@h:p/?api_key=k`` all give
``http://h:p/<path>`` with the query kept *after* the path and the user info removed (sent
instead as a Basic ``Authorization`` header by ``basic_auth_header``).
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

DEFAULT_MAX_BYTES = 4 << 20
_READ_CHUNK = 64 << 10


class HTTPCallError(OSError):
    """The server did not answer in time, refused the connection, or broke HTTP."""


@dataclass
class Reply:
    """A server's answer: status, headers (lower-case names), at most ``max_bytes`` of body."""

    status: int
    reason: str
    headers: dict[str, str]
    body: bytes
    truncated: bool = False

    @property
    def text(self) -> str:
        """The body as text (undecodable bytes replaced)."""
        return self.body.decode("utf-8", errors="replace")

    def json(self) -> Any:
        """The body as JSON; ValueError when it is not (or was cut at ``max_bytes``)."""
        if self.truncated:
            raise ValueError(f"answer larger than {len(self.body)} bytes")
        return json.loads(self.body)


def join_url(base_url: str, path: str) -> str:
    """``base_url`` (a server's root or its ``/v1``) with ``path`` put before its query, and
    without user info (see the module docstring)."""
    parts = urlsplit(base_url)
    root = parts.path.rstrip("/").removesuffix("/v1").rstrip("/")
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, host, root + "/" + path.lstrip("/"), parts.query, ""))


def basic_auth_header(base_url: str) -> dict[str, str]:
    """``{"Authorization": "Basic ..."}`` from the URL's ``user:password@``; {} without."""
    netloc = urlsplit(base_url).netloc
    if "@" not in netloc:
        return {}
    user, _, password = netloc.rsplit("@", 1)[0].partition(":")
    pair = f"{unquote(user)}:{unquote(password)}".encode()
    return {"Authorization": "Basic " + base64.b64encode(pair).decode("ascii")}


def call(method: str, url: str, *, deadline_s: float, json_body: Any = None,
         headers: dict[str, str] | None = None,
         max_bytes: int = DEFAULT_MAX_BYTES) -> Reply:
    """One HTTP request finished within ``deadline_s`` in total; HTTPCallError otherwise.

    ``url`` is a full URL (``join_url``); user info in it is ignored, never sent.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise HTTPCallError(f"not an http(s) URL: {parts.scheme}://{parts.hostname or ''}")
    body = None if json_body is None else json.dumps(json_body).encode()
    sent = {"Accept": "*/*", **({"Content-Type": "application/json"} if body else {}),
            **(headers or {})}
    target = urlunsplit(("", "", parts.path or "/", parts.query, ""))
    started = time.monotonic()
    connection = _connection(parts.scheme, parts.hostname, parts.port, deadline_s)
    fired = threading.Event()
    watchdog = threading.Timer(deadline_s, _shut, (connection, fired))
    watchdog.daemon = True
    watchdog.start()
    late = HTTPCallError(f"no complete answer within {deadline_s:g} s")
    try:
        connection.request(method, target, body=body, headers=sent)
        response = connection.getresponse()
        data, truncated = _read_bounded(response, max_bytes, started + deadline_s)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if fired.is_set() or time.monotonic() - started >= deadline_s:
            raise late from None
        raise HTTPCallError(f"{type(exc).__name__}: {exc}") from None
    finally:
        watchdog.cancel()
        connection.close()
    if fired.is_set():  # the socket was shut under a read: what came is not the answer
        raise late
    return Reply(response.status, response.reason or "",
                 {k.lower(): v for k, v in response.getheaders()}, data, truncated)


def _connection(scheme: str, host: str, port: int | None,
                deadline_s: float) -> http.client.HTTPConnection:
    if scheme == "https":
        return http.client.HTTPSConnection(host, port, timeout=deadline_s,
                                           context=ssl.create_default_context())
    return http.client.HTTPConnection(host, port, timeout=deadline_s)


def _shut(connection: http.client.HTTPConnection, fired: threading.Event) -> None:
    """The deadline passed: wake any read blocked on the socket (it then fails)."""
    fired.set()
    sock = connection.sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def _read_bounded(response: http.client.HTTPResponse, max_bytes: int,
                  deadline: float) -> tuple[bytes, bool]:
    """At most ``max_bytes`` of the body, and whether more was there."""
    chunks: list[bytes] = []
    size = 0
    while size <= max_bytes:
        if time.monotonic() >= deadline:
            raise TimeoutError("deadline")
        chunk = response.read1(min(_READ_CHUNK, max_bytes + 1 - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    data = b"".join(chunks)
    return data[:max_bytes], size > max_bytes
