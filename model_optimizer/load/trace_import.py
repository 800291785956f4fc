"""LiteLLM's logs as a trace (``mopt workload import``).

LiteLLM (the OpenAI-compatible gateway mopt's fleet router runs, docs/fleet.md) logs every
call as a ``StandardLoggingPayload`` (its docs: proxy/logging_spec); its file, S3/GCS bucket
and custom-callback loggers write one JSON object per call. The fields read:

- ``startTime`` (epoch seconds): the arrival; ``status``: only ``success`` calls are kept;
- ``prompt_tokens``, ``completion_tokens``: the lengths (the output is what was generated);
- ``messages``: the request's chat; ``metadata`` / ``metadata.requester_metadata``: a session
  id under ``session_key`` (default ``session_id``); ``model_group`` (else ``model``): the
  class, made a valid class name.

A request of a session keeps, as its own input, the messages after its chat's last
assistant message (its new turn); without a session id in the metadata, a chat with an
assistant message is a later turn of the session its first user message (and end user)
starts. With the
messages redacted (LiteLLM's ``turn_off_message_logging``), the turn's input is its
``prompt_tokens`` less the session's previous prompt and output. Bad lines raise UsageError
(``file:line``, exit 2); the file is bounded like a trace (``load.trace``).
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from model_optimizer.errors import UsageError
from model_optimizer.fsutil import atomic_write_text
from model_optimizer.load.trace import MAX_TRACE_BYTES, MAX_TRACE_LINES

_NOT_CLASS = re.compile(r"[^A-Za-z0-9_.-]+")


def import_litellm(log: Path, out: Path, session_key: str = "session_id") -> tuple[int, int]:
    """Write ``log``'s successful calls to ``out`` as a trace; (written, skipped failures)."""
    rows, skipped = _read_calls(Path(log), session_key)
    if not rows:
        raise UsageError(f"{log}: no successful call to import (status 'success'); is this "
                         "a LiteLLM StandardLoggingPayload log, one JSON object per line?")
    rows.sort(key=lambda row: row["timestamp"])
    context: dict[str, int] = {}  # session -> its conversation so far, in tokens
    lines = []
    for row in rows:
        total, session = row.pop("total_prompt_tokens"), row.get("session")
        if "prompt" not in row:
            row["prompt_tokens"] = max(1, total - context.get(session, 0)) if session \
                else total
        if session:
            context[session] = total + row["output_tokens"]
        lines.append(json.dumps({k: v for k, v in row.items() if v is not None}))
    atomic_write_text(Path(out), "\n".join(lines) + "\n")
    return len(lines), skipped


def _read_calls(log: Path, session_key: str) -> tuple[list[dict[str, Any]], int]:
    if not log.is_file():
        raise UsageError(f"{log}: log file not found")
    if log.stat().st_size > MAX_TRACE_BYTES:
        raise UsageError(f"{log}: over the {MAX_TRACE_BYTES // 2**20} MiB limit; split it "
                         "first")
    rows, skipped = [], 0
    with log.open(encoding="utf-8", errors="replace") as handle:
        for number, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            where = f"{log}:{number}"
            try:
                call = json.loads(text)
            except json.JSONDecodeError as exc:
                raise UsageError(f"{where}: not valid JSON ({exc.msg}); the log must hold one "
                                 "StandardLoggingPayload object per line") from None
            if not isinstance(call, dict):
                raise UsageError(f"{where}: expected a JSON object (a StandardLoggingPayload)")
            if call.get("status", "success") != "success":
                skipped += 1
                continue
            rows.append(_row(where, call, session_key))
            if len(rows) > MAX_TRACE_LINES:
                raise UsageError(f"{where}: more than {MAX_TRACE_LINES:,} calls; split the log")
    return rows, skipped


def _row(where: str, call: dict[str, Any], session_key: str) -> dict[str, Any]:
    start = call.get("startTime")
    if isinstance(start, bool) or not isinstance(start, (int, float)):
        raise UsageError(f"{where}: 'startTime' must be epoch seconds, got {start!r}; is this "
                         "a StandardLoggingPayload?")
    counts = {}
    for key in ("prompt_tokens", "completion_tokens"):
        value = call.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UsageError(f"{where}: '{key}' must be a whole number, got {value!r}")
        counts[key] = value
    messages = call.get("messages")
    chat = messages if isinstance(messages, list) and messages and all(
        isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages) else None
    session = _session(call, session_key, chat)
    model = str(call.get("model_group") or call.get("model") or "")
    row: dict[str, Any] = {"timestamp": float(start), "output_tokens":
                           max(1, counts["completion_tokens"]), "session": session,
                           "class": _NOT_CLASS.sub("_", model)[:64] or None,
                           "total_prompt_tokens": max(1, counts["prompt_tokens"])}
    if chat is not None:
        assistant = [i for i, m in enumerate(chat) if m.get("role") == "assistant"]
        new = chat[assistant[-1] + 1:] if assistant and session else chat
        text = "\n\n".join(m["content"] for m in new if m["content"])
        if text:
            row["prompt"] = text
    return row


def _session(call: dict[str, Any], key: str, chat: list[dict] | None) -> str | None:
    metadata = call.get("metadata") if isinstance(call.get("metadata"), dict) else {}
    requester = metadata.get("requester_metadata")
    for source in (metadata, requester if isinstance(requester, dict) else {}):
        if source.get(key) not in (None, ""):
            return str(source[key])[:256]
    first = next((m["content"] for m in chat or () if m.get("role") == "user"), None)
    if not first:
        return None  # no chat logged: every call stands alone
    seed = f"{call.get('end_user') or ''}\n{first}"
    return "c-" + hashlib.sha256(seed.encode()).hexdigest()[:16]
