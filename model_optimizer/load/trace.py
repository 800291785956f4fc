"""Request traces: real traffic as a workload, replayed at its own arrival times.

A trace is a JSONL file, one request per line (docs/workloads.md, "Traces"):

- ``timestamp`` (required): when the request arrived: seconds (a number: epoch seconds or
  seconds from any origin) or an ISO-8601 text (``2026-05-01T12:00:03.250Z``); one form
  throughout the file. Only differences matter: replay starts at the earliest.
- ``prompt`` (text) or ``prompt_tokens`` (a length: mopt makes a prompt of that many tokens),
  exactly one; for a later turn of a session, the turn's *new* input only.
- ``output_tokens`` (required): tokens the request generates (``max_tokens``).
- ``session`` (optional): a conversation id; each turn is sent with the conversation so far
  (earlier turns' prompts and stand-ins for their outputs) in front: a shared prefix.
- ``class`` (optional): a label the report groups figures by. ``id`` and ``metadata`` are
  allowed and ignored; any other key is an error.

Lines may be out of order (gateways log at completion): they are sorted by timestamp,
stably. Every problem raises ``UsageError`` (exit 2) naming ``file:line`` and the fix.
Reading is bounded: a file over ``MAX_TRACE_BYTES`` or with more than ``MAX_TRACE_LINES``
requests is refused before it is replayed.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from model_optimizer.errors import UsageError
from model_optimizer.load.dataset import CLASS_NAME, bounded_input

MAX_TRACE_BYTES = 256 * 1024 * 1024
MAX_TRACE_LINES = 1_000_000
MAX_TOKENS = 1_048_576
KEYS = ("timestamp", "prompt", "prompt_tokens", "output_tokens", "session", "class", "id",
        "metadata")
_SESSION = re.compile(r"^.{1,256}$", re.DOTALL)
_EXAMPLE = '{"timestamp": 0.5, "prompt_tokens": 300, "output_tokens": 40, "session": "s1"}'


@dataclass(frozen=True)
class TraceEntry:
    """One request of a trace. ``at_s``: seconds after the trace's first request;
    ``previous``: the index (in the sorted trace) of the session's turn before this one."""

    line: int
    at_s: float
    output_tokens: int
    prompt: str | None = None
    prompt_tokens: int | None = None
    session: str | None = None
    request_class: str | None = None
    turn: int = 0
    previous: int | None = None


@dataclass(frozen=True)
class Trace:
    """A read trace: its entries in arrival order (``at_s`` from 0)."""

    path: Path
    entries: tuple[TraceEntry, ...]
    reordered: int = 0  # lines that were out of timestamp order in the file
    classes: frozenset[str] = field(default_factory=frozenset)

    @property
    def span_s(self) -> float:
        """Seconds from the first arrival to the last."""
        return self.entries[-1].at_s

    def rate(self) -> float | None:
        """The trace's own request rate (requests/s between the first and last arrival);
        None for a trace whose requests all arrive at once."""
        return (len(self.entries) - 1) / self.span_s if self.span_s > 0 else None

    def sessions(self) -> int:
        """Distinct sessions."""
        return len({entry.session for entry in self.entries if entry.session is not None})


def parse_speed(value: Any) -> float:
    """``2``, ``2.5``, ``"2x"``, ``"0.5x"`` -> a positive replay speed factor."""
    text = str(value).strip().lower()
    text = text[:-1] if text.endswith("x") else text
    try:
        speed = float(text)
    except ValueError:
        speed = math.nan
    if not math.isfinite(speed) or speed <= 0:
        raise UsageError(f"replay speed {value!r} is not a positive factor; write e.g. 2x "
                         "(twice as fast) or 0.5x (half speed)")
    return speed


def read_trace(path: str | Path) -> Trace:
    """The trace at ``path`` (see the module docstring), sorted by arrival."""
    path = bounded_input(path, MAX_TRACE_BYTES, "trace file", "workload.trace",
                         "cut it into shorter spans first")
    raw = _read_lines(path)
    if not raw:
        raise UsageError(f"{path}: the trace holds no requests; add at least one line like "
                         f"{_EXAMPLE}")
    order = sorted(range(len(raw)), key=lambda i: raw[i][1])
    reordered = sum(1 for i, j in zip(order, order[1:], strict=False) if j < i)
    first = raw[order[0]][1]
    last_turn: dict[str, tuple[int, int]] = {}
    entries = []
    for position, index in enumerate(order):
        fields, at = raw[index][0], raw[index][1]
        session, previous, turn = fields["session"], None, 0
        if session is not None and session in last_turn:
            previous, turn = last_turn[session][0], last_turn[session][1] + 1
        if session is not None:
            last_turn[session] = (position, turn)
        entries.append(TraceEntry(at_s=at - first, turn=turn, previous=previous, **fields))
    classes = frozenset(e.request_class for e in entries if e.request_class is not None)
    return Trace(path, tuple(entries), reordered, classes)


def _read_lines(path: Path) -> list[tuple[dict[str, Any], float]]:
    rows: list[tuple[dict[str, Any], float]] = []
    clock_form: tuple[int, str] | None = None  # (first line, "number" | "aware" | "naive")
    with path.open("rb") as handle:
        for number, data in enumerate(handle, start=1):
            where = f"{path}:{number}"
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise UsageError(f"{where}: not valid UTF-8 ({exc.reason}); save the trace "
                                 "as UTF-8") from None
            if not text.strip():
                continue
            if len(rows) >= MAX_TRACE_LINES:
                raise UsageError(f"{where}: more than {MAX_TRACE_LINES:,} requests; replay "
                                 "a shorter span (split the file)")
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                raise UsageError(f"{where}: not valid JSON ({exc.msg} at column "
                                 f"{exc.colno}); each line must be one JSON object, e.g. "
                                 f"{_EXAMPLE}") from None
            fields, at, form = parse_line(where, obj)
            if clock_form is None:
                clock_form = (number, form)
            elif form != clock_form[1]:
                raise UsageError(f"{where}: timestamp is {_FORMS[form]}, but line "
                                 f"{clock_form[0]}'s is {_FORMS[clock_form[1]]}; write "
                                 "every timestamp in one form")
            rows.append((dict(fields, line=number), at))
    return rows


_FORMS = {"number": "a number of seconds", "aware": "ISO-8601 with a time zone",
          "naive": "ISO-8601 without a time zone"}


def parse_line(where: str, obj: Any) -> tuple[dict[str, Any], float, str]:
    """One trace line -> (TraceEntry fields but line/at_s/turn, arrival seconds, clock form)."""
    if not isinstance(obj, dict):
        raise UsageError(f"{where}: expected a JSON object, got {type(obj).__name__}; write "
                         f"{_EXAMPLE}")
    for key in obj:
        if key not in KEYS:
            close = difflib.get_close_matches(key, KEYS, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(KEYS)}"
            raise UsageError(f"{where}: unknown key '{key}' ({hint})")
    at, form = _timestamp(where, obj.get("timestamp"))
    has_text, has_length = obj.get("prompt") is not None, obj.get("prompt_tokens") is not None
    if has_text == has_length:
        raise UsageError(f"{where}: needs exactly one of 'prompt' (text) or 'prompt_tokens' "
                         "(a length); keep one")
    prompt = obj.get("prompt")
    if has_text and (not isinstance(prompt, str) or not prompt):
        raise UsageError(f"{where}: 'prompt' must be non-empty text")
    session = obj.get("session")
    if session is not None:
        if isinstance(session, int) and not isinstance(session, bool):
            session = str(session)
        if not isinstance(session, str) or not _SESSION.match(session):
            raise UsageError(f"{where}: 'session' must be an id of 1 to 256 characters, got "
                             f"{session!r}")
    request_class = obj.get("class")
    if request_class is not None and (not isinstance(request_class, str)
                                      or not CLASS_NAME.match(request_class)):
        raise UsageError(f"{where}: 'class' must be a name of letters, digits, '.', '_' or "
                         f"'-' (at most 64), got {request_class!r}")
    fields = {"prompt": prompt,
              "prompt_tokens": _count(where, obj, "prompt_tokens") if has_length else None,
              "output_tokens": _count(where, obj, "output_tokens"),
              "session": session, "request_class": request_class}
    return fields, at, form


def _count(where: str, obj: dict, key: str) -> int:
    value = obj.get(key)
    if value is None:
        raise UsageError(f"{where}: '{key}' is missing; give the request's {key} as a whole "
                         "number")
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TOKENS:
        raise UsageError(f"{where}: '{key}' must be a whole number from 1 to {MAX_TOKENS}, got "
                         f"{value!r}")
    return value


def _timestamp(where: str, value: Any) -> tuple[float, str]:
    if value is None:
        raise UsageError(f"{where}: 'timestamp' is missing; give the arrival time in seconds "
                         "or as ISO-8601 text")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise UsageError(f"{where}: 'timestamp' {value!r} is not a finite number")
        return float(value), "number"
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            moment = None
        if moment is not None:
            aware = moment.tzinfo is not None
            seconds = (moment if aware else moment.replace(tzinfo=UTC)).timestamp()
            return seconds, "aware" if aware else "naive"
    raise UsageError(f"{where}: 'timestamp' {value!r} is neither seconds nor ISO-8601; write "
                     "e.g. 12.5 or \"2026-05-01T12:00:03.250Z\"")
