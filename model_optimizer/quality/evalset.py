"""Evaluation sets: the prompts an eval sends, and (optionally) how to score the answers.

One JSONL file, one JSON object per line (blank lines and lines starting with ``#`` are
skipped)::

    {"id": "add-3-4", "prompt": "three plus four is", "reference": "seven", "scorer": "exact"}
    {"messages": [{"role": "user", "content": "count from two"}]}

- ``prompt`` (a string, sent to ``/v1/completions``) or ``messages`` (a chat, sent to
  ``/v1/chat/completions``): exactly one of the two.
- ``id``: a unique name (default: ``line<N>``).
- ``reference`` and ``scorer``: items with a reference count towards task accuracy; items
  without one are used for fidelity (agreement with a baseline) only. Scorers
  (:mod:`model_optimizer.quality.scoring`): ``exact`` (the answer's first line equals the
  reference, whitespace collapsed), ``contains``, ``number`` (the first number in the answer
  equals the reference's), ``regex`` (``pattern`` matches; with a reference, its first group
  must equal it). Default scorer with a reference: ``exact``.
- ``max_tokens``: this item's generation length (default: the eval's ``max_tokens``).
- ``class``: the item's class (e.g. ``general``, ``math``, ``code``): accuracy and its drop
  against a baseline are also reported per class, and the gate's ``max_accuracy_drop``
  applies to each class as well as to the whole set.

Every problem is reported at once as ``file:line: message (fix)``. ``mopt:general`` names the
general eval set shipped with mopt (24 items, classes general, math and code; CC0-1.0).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from model_optimizer.errors import UsageError

SCORERS = ("exact", "contains", "number", "regex")
_KEYS = {"id", "prompt", "messages", "reference", "scorer", "pattern", "max_tokens", "class"}
_CLASS = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$")
MAX_ITEMS = 100_000
MAX_LINE_CHARS = 1_000_000


@dataclass(frozen=True)
class EvalItem:
    """One prompt of an eval set, with its optional reference answer."""

    id: str
    prompt: str | None = None
    messages: tuple[dict, ...] | None = None
    reference: str | None = None
    scorer: str | None = None
    pattern: str | None = None
    max_tokens: int | None = None
    line: int = 0
    item_class: str | None = None

    @property
    def scored(self) -> bool:
        """True when the item counts towards task accuracy."""
        return self.scorer is not None

    def to_dict(self) -> dict:
        """JSON form (the archive's ``evalset.jsonl`` lines)."""
        out = {"id": self.id}
        if self.prompt is not None:
            out["prompt"] = self.prompt
        if self.messages is not None:
            out["messages"] = list(self.messages)
        for key in ("reference", "scorer", "pattern", "max_tokens"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.item_class is not None:
            out["class"] = self.item_class
        return out


@dataclass
class _Problems:
    file: str
    found: list[str] = field(default_factory=list)

    def add(self, line: int, message: str, fix: str) -> None:
        self.found.append(f"{self.file}:{line}: {message} ({fix})")


def _check_chat(messages: object, line: int, problems: _Problems) -> bool:
    ok = (isinstance(messages, list) and bool(messages)
          and all(isinstance(m, dict) and isinstance(m.get("role"), str)
                  and isinstance(m.get("content"), str) for m in messages))
    if not ok:
        problems.add(line, "messages must be a non-empty list of {role, content} strings",
                     'write e.g. [{"role": "user", "content": "..."}]')
    return ok


def _item(data: dict, line: int, problems: _Problems) -> EvalItem | None:
    before = len(problems.found)
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        problems.add(line, f"unknown key(s) {', '.join(unknown)}",
                     f"allowed keys: {', '.join(sorted(_KEYS))}")
    prompt, messages = data.get("prompt"), data.get("messages")
    if (prompt is None) == (messages is None):
        problems.add(line, "needs exactly one of 'prompt' and 'messages'",
                     "give a prompt string or a chat message list")
    if prompt is not None and (not isinstance(prompt, str) or not prompt):
        problems.add(line, "prompt must be a non-empty string", "quote the prompt text")
    if messages is not None:
        _check_chat(messages, line, problems)
    reference, scorer, pattern = data.get("reference"), data.get("scorer"), data.get("pattern")
    if reference is not None and not isinstance(reference, str | int | float):
        problems.add(line, "reference must be a string or a number", "write the answer text")
    if scorer is None and (reference is not None or pattern is not None):
        scorer = "regex" if reference is None else "exact"
    if scorer is not None and scorer not in SCORERS:
        problems.add(line, f"unknown scorer {scorer!r}", f"use one of {', '.join(SCORERS)}")
    if scorer in ("exact", "contains", "number") and reference is None:
        problems.add(line, f"scorer {scorer!r} needs a reference", "add \"reference\": ...")
    if scorer == "regex":
        try:
            re.compile(pattern if isinstance(pattern, str) else "")
        except re.error as exc:
            problems.add(line, f"pattern does not compile: {exc}", "fix the regular expression")
        if not isinstance(pattern, str) or not pattern:
            problems.add(line, "scorer 'regex' needs a pattern", 'add "pattern": "..."')
    max_tokens = data.get("max_tokens")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(
            max_tokens, bool) or not 1 <= max_tokens <= 32768):
        problems.add(line, "max_tokens must be an integer from 1 to 32768", "e.g. 16")
    item_class = data.get("class")
    if item_class is not None and not (isinstance(item_class, str) and _CLASS.match(item_class)):
        problems.add(line, "class must be a short name (letters, digits, '_', '-')",
                     'e.g. "math"')
    item_id = data.get("id", f"line{line}")
    if not isinstance(item_id, str | int) or isinstance(item_id, bool) or item_id == "":
        problems.add(line, "id must be a non-empty string", "e.g. \"add-3-4\"")
    if len(problems.found) > before:
        return None
    return EvalItem(str(item_id), prompt, tuple(messages) if messages else None,
                    None if reference is None else str(reference), scorer, pattern,
                    max_tokens, line, item_class)


def parse_eval_set(text: str, file: str) -> list[EvalItem]:
    """Parse eval-set JSONL ``text``; raise UsageError listing every problem."""
    problems = _Problems(file)
    items: list[EvalItem] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if len(stripped) > MAX_LINE_CHARS:
            problems.add(number, f"line longer than {MAX_LINE_CHARS:,} characters",
                         "shorten the prompt")
            continue
        try:
            data = json.loads(stripped)
        except ValueError as exc:
            problems.add(number, f"not valid JSON: {exc.msg} at column {exc.colno}",
                         "one JSON object per line")
            continue
        if not isinstance(data, dict):
            problems.add(number, "not a JSON object", 'write {"prompt": "..."}')
            continue
        item = _item(data, number, problems)
        if item is None:
            continue
        if item.id in seen:
            problems.add(number, f"id {item.id!r} already used on line {seen[item.id]}",
                         "give every item its own id")
            continue
        seen[item.id] = number
        items.append(item)
        if len(items) > MAX_ITEMS:
            problems.add(number, f"more than {MAX_ITEMS:,} items", "split the eval set")
            break
    if not items and not problems.found:
        problems.add(1, "no items", "add one JSON object per line")
    if problems.found:
        raise UsageError(f"{len(problems.found)} problem(s) in the eval set:\n"
                         + "\n".join(problems.found[:50]))
    return items


BUILTIN_PREFIX = "mopt:"
_BUILTIN_DIR = Path(__file__).resolve().parent / "data"


def builtin_eval_set(name: str) -> Path:
    """The eval set shipped with mopt as ``mopt:<name>`` (package data, so it is there in an
    installed wheel too); UsageError naming the ones there are."""
    found = _BUILTIN_DIR / f"{name.removeprefix(BUILTIN_PREFIX)}.jsonl"
    if not found.is_file():
        known = ", ".join(f"{BUILTIN_PREFIX}{p.stem}" for p in sorted(_BUILTIN_DIR.glob("*.jsonl")))
        raise UsageError(f"quality.eval_set {name}: no such eval set shipped with mopt "
                         f"(shipped: {known}); or give a JSONL file")
    return found


def load_eval_set(path: str | Path) -> list[EvalItem]:
    """Read and parse an eval-set JSONL file (see the module docstring)."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{file}: eval set not found (check quality.eval_set or --eval-set)"
                         ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{file}: cannot read the eval set: {exc}") from None
    return parse_eval_set(text, str(file))
