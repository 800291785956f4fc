"""Prompt files: JSONL, CSV and ShareGPT-style JSON read into typed entries.

Formats (docs/workloads.md shows each):

- **JSONL** (``.jsonl``): one JSON object per line with ``prompt`` (text) or ``messages``
  (chat: a list of ``{role, content}``), optional ``output_tokens`` (or ``max_tokens``, the
  same thing) and optional ``class`` (a label the report groups by). ``id`` and ``metadata``
  are allowed and ignored; any other key is an error (a typo must not pass silently).
  Blank lines are skipped.
- **CSV** (``.csv``): a header row naming ``prompt`` and optionally ``output_tokens`` /
  ``max_tokens``, ``class``, ``id``; one request per row.
- **ShareGPT** (``.json``): a JSON array of objects with ``conversations``: a list of turns
  ``{from: human|gpt|system, value}`` (``role``/``content`` also read). The first human
  turn is the prompt; the reply after it, when there is one, gives the output length as
  measured in the model's tokenizer (as ``vllm bench`` does). Optional ``class``.

Every problem raises ``UsageError`` (exit 2) naming ``file:line`` and the fix. Reading is
bounded: files over ``MAX_DATASET_BYTES`` are refused before they are read.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from model_optimizer.errors import UsageError

MAX_DATASET_BYTES = 512 * 1024 * 1024
FORMATS = ("jsonl", "csv", "sharegpt")
CLASS_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_KEYS = ("prompt", "messages", "output_tokens", "max_tokens", "class", "id", "metadata")
_HUMAN = ("human", "user")
_REPLY = ("gpt", "assistant", "chatgpt", "bard", "model")
T = TypeVar("T")


@dataclass(frozen=True)
class DatasetEntry:
    """One request read from a prompt file (``line`` is 1-based, for error messages)."""

    line: int
    prompt: str | None = None
    messages: tuple[dict, ...] | None = None
    output_tokens: int | None = None
    output_text: str | None = None  # ShareGPT: the reply whose length sets output_tokens
    request_class: str | None = None


def detect_format(path: Path, given: str | None = None) -> str:
    """The format of ``path``: ``given`` unless it is None or 'auto', else by extension."""
    if given not in (None, "auto"):
        if given not in FORMATS:
            raise UsageError(f"unknown dataset format {given!r}; use one of "
                             f"{', '.join(FORMATS)} or auto")
        return given
    by_suffix = {".jsonl": "jsonl", ".csv": "csv", ".json": "sharegpt"}
    found = by_suffix.get(path.suffix.lower())
    if found is None:
        raise UsageError(f"{path}: cannot tell the dataset format from the extension "
                         f"'{path.suffix}'; name it .jsonl, .csv or .json, or set "
                         "workload.dataset.format")
    return found

def bounded_input(path: str | Path, limit: int, what: str, knob: str, smaller: str) -> Path:
    """``path`` as a Path once it is a file no larger than ``limit`` bytes; otherwise a
    UsageError naming the file, the recipe ``knob`` that names it and the fix (``smaller``:
    how to make it fit). The one rule for an input file mopt reads whole."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: {what} not found; check {knob} "
                         "(relative paths start at the recipe's folder)")
    size = path.stat().st_size
    if size > limit:
        raise UsageError(f"{path}: {size / 2**20:.0f} MiB is over the {limit // 2**20} MiB "
                         f"limit for a {what}; {smaller}")
    return path



def read_dataset(path: str | Path, fmt: str | None = None) -> list[DatasetEntry]:
    """Every entry of the prompt file at ``path`` (see the module docstring)."""
    path = bounded_input(path, MAX_DATASET_BYTES, "dataset file", "workload.dataset.path",
                         "sample it down first")
    fmt = detect_format(path, fmt)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[:exc.start].count(b"\n") + 1
        raise UsageError(f"{path}:{line}: not valid UTF-8 ({exc.reason}); "
                         "save the file as UTF-8") from None
    reader = {"jsonl": _read_jsonl, "csv": _read_csv, "sharegpt": _read_sharegpt}[fmt]
    entries = reader(path, text)
    if not entries:
        raise UsageError(f"{path}: the dataset holds no prompts; add at least one "
                         f"{'line' if fmt != 'sharegpt' else 'conversation'}")
    return entries


# ----- JSONL ---------------------------------------------------------------------------------

def read_jsonl(lines: Iterable[str], parse: Callable[[int, Any], T], *,
               bad_json: Callable[[int, json.JSONDecodeError], str],
               comments: bool = False, limit: int | None = None) -> list[T]:
    """``parse(line number, value)`` of each JSON line, in order (every JSONL prompt file mopt
    reads goes through here): blank lines skipped, ``#`` lines too with ``comments``, at most
    ``limit`` values; a line that is not JSON raises ``UsageError(bad_json(number, error))``
    (the column is the file's)."""
    values: list[T] = []
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped or (comments and stripped.startswith("#")):
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UsageError(bad_json(number, exc)) from None
        values.append(parse(number, value))
        if limit is not None and len(values) >= limit:
            break
    return values


def _read_jsonl(path: Path, text: str) -> list[DatasetEntry]:
    return read_jsonl(
        text.splitlines(), lambda number, obj: _entry_from_object(path, number, obj),
        bad_json=lambda number, exc: (
            f"{path}:{number}: not valid JSON ({exc.msg} at column {exc.colno}); each line "
            'must be one JSON object, e.g. {"prompt": "Hello", "output_tokens": 64}'))


def _entry_from_object(path: Path, line_no: int, obj: Any) -> DatasetEntry:
    where = f"{path}:{line_no}"
    if not isinstance(obj, dict):
        raise UsageError(f"{where}: expected a JSON object, got {type(obj).__name__}; "
                         'write {"prompt": "..."}')
    for key in obj:
        if key not in _KEYS:
            close = difflib.get_close_matches(key, _KEYS, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"known keys: {', '.join(_KEYS)}"
            raise UsageError(f"{where}: unknown key '{key}' ({hint})")
    has_prompt, has_messages = obj.get("prompt") is not None, obj.get("messages") is not None
    if has_prompt == has_messages:
        raise UsageError(f"{where}: needs exactly one of 'prompt' (text) or 'messages' "
                         "(a chat: a list of {role, content})")
    prompt = messages = None
    if has_prompt:
        prompt = obj["prompt"]
        if not isinstance(prompt, str) or not prompt:
            raise UsageError(f"{where}: 'prompt' must be non-empty text")
    else:
        messages = _messages(where, obj["messages"])
    return DatasetEntry(line=line_no, prompt=prompt, messages=messages,
                        output_tokens=_output_tokens(where, obj),
                        request_class=_class_name(where, obj.get("class")))


def _messages(where: str, value: Any) -> tuple[dict, ...]:
    if not isinstance(value, list) or not value:
        raise UsageError(f"{where}: 'messages' must be a non-empty list of "
                         "{role, content} objects")
    for message in value:
        if (not isinstance(message, dict) or not isinstance(message.get("role"), str)
                or not isinstance(message.get("content"), str)):
            raise UsageError(f"{where}: every message needs a text 'role' and 'content', "
                             f"got {json.dumps(message)[:80]}")
    return tuple({"role": m["role"], "content": m["content"]} for m in value)


def _output_tokens(where: str, obj: dict) -> int | None:
    values = {k: obj[k] for k in ("output_tokens", "max_tokens") if obj.get(k) not in (None, "")}
    if len(values) == 2 and values["output_tokens"] != values["max_tokens"]:
        raise UsageError(f"{where}: 'output_tokens' and 'max_tokens' disagree "
                         f"({values['output_tokens']} vs {values['max_tokens']}); keep one")
    if not values:
        return None
    key, value = next(iter(values.items()))
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"{where}: '{key}' must be a whole number of at least 1, got "
                         f"{value!r}")
    return value


def _class_name(where: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not CLASS_NAME.match(value):
        raise UsageError(f"{where}: 'class' must be a name of letters, digits, '.', '_' "
                         f"or '-' (at most 64), got {value!r}")
    return value


# ----- CSV -----------------------------------------------------------------------------------

def _read_csv(path: Path, text: str) -> list[DatasetEntry]:
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = reader.fieldnames or []
    if "prompt" not in header:
        raise UsageError(f"{path}:1: the header row must name a 'prompt' column "
                         f"(found: {', '.join(header) or 'nothing'})")
    for column in header:
        if column not in _KEYS or column in ("messages", "metadata"):
            close = difflib.get_close_matches(column, _KEYS, n=1)
            hint = f"did you mean '{close[0]}'?" if close else \
                "columns: prompt, output_tokens or max_tokens, class, id"
            raise UsageError(f"{path}:1: unknown column '{column}' ({hint})")
    entries, line_no = [], 1
    try:
        for row in reader:
            line_no = reader.line_num
            if None in row:
                raise UsageError(f"{path}:{line_no}: more fields than the header has columns; "
                                 "quote prompts that contain commas")
            if not any((value or "").strip() for value in row.values()):
                continue
            entries.append(_entry_from_object(
                path, line_no, {k: (v if v != "" else None) for k, v in row.items()}))
    except csv.Error as exc:
        raise UsageError(f"{path}:{reader.line_num}: malformed CSV ({exc}); "
                         "check the quoting") from None
    return entries


# ----- ShareGPT ------------------------------------------------------------------------------

def _read_sharegpt(path: Path, text: str) -> list[DatasetEntry]:
    decoder = json.JSONDecoder()
    position = _skip_space(text, 0)
    if not text[position:position + 1] == "[":
        raise UsageError(f"{path}:{_line_at(text, position)}: a ShareGPT file is a JSON "
                         'array of {"conversations": [...]} objects')
    position = _skip_space(text, position + 1)
    entries: list[DatasetEntry] = []
    while text[position:position + 1] != "]":
        line_no = _line_at(text, position)
        try:
            obj, position = decoder.raw_decode(text, position)
        except ValueError as exc:
            line = _line_at(text, getattr(exc, "pos", position))
            raise UsageError(f"{path}:{line}: not valid JSON ({exc}); check the file is "
                             "one complete JSON array") from None
        entry = _sharegpt_entry(path, line_no, obj)
        if entry is not None:
            entries.append(entry)
        position = _skip_space(text, position)
        if text[position:position + 1] == ",":
            position = _skip_space(text, position + 1)
        elif text[position:position + 1] != "]":
            raise UsageError(f"{path}:{_line_at(text, position)}: expected ',' or ']' "
                             "between conversations")
    if text[_skip_space(text, position + 1):].strip():
        raise UsageError(f"{path}:{_line_at(text, position + 1)}: text after the array's end")
    return entries


def _sharegpt_entry(path: Path, line_no: int, obj: Any) -> DatasetEntry | None:
    where = f"{path}:{line_no}"
    turns = obj.get("conversations") if isinstance(obj, dict) else None
    if not isinstance(turns, list):
        raise UsageError(f"{where}: each element needs a 'conversations' list of "
                         "{from, value} turns")
    parsed = []
    for turn in turns:
        speaker = turn.get("from", turn.get("role")) if isinstance(turn, dict) else None
        value = turn.get("value", turn.get("content")) if isinstance(turn, dict) else None
        if not isinstance(speaker, str) or not isinstance(value, str):
            raise UsageError(f"{where}: every turn needs text 'from' and 'value' "
                             f"(or 'role' and 'content'), got {json.dumps(turn)[:80]}")
        parsed.append((speaker.lower(), value))
    start = next((i for i, (who, text) in enumerate(parsed) if who in _HUMAN and text), None)
    if start is None:
        return None  # no human turn with text: nothing to send (vllm bench skips these too)
    reply = parsed[start + 1][1] if start + 1 < len(parsed) and \
        parsed[start + 1][0] in _REPLY and parsed[start + 1][1] else None
    return DatasetEntry(line=line_no, prompt=parsed[start][1], output_text=reply,
                        request_class=_class_name(where, obj.get("class")))


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\r\n":
        position += 1
    return position


def _line_at(text: str, position: int) -> int:
    return text.count("\n", 0, position) + 1
