"""The user's own prompt file: read it (JSONL), measure it in the model's tokenizer.

One JSON object per line, blank lines and ``#`` lines skipped, with one of:

- ``"prompt": "text"`` (completions),
- ``"messages": [{"role": "user", "content": "text"}, ...]`` (chat; contents joined),
- ``"text": "text"`` (plain calibration text).

`mopt init --prompts` sizes the workload from it; `mopt quantize` calibrates on it. Lengths
are counted with the model folder's ``tokenizer.json`` (the ``tokenizers`` library, no model
code loaded); without one, whitespace words are counted and the report says so.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from model_optimizer.errors import UsageError
from model_optimizer.load.dataset import read_jsonl

MAX_PROMPTS = 100_000
TOKENIZER_COUNT = "tokenizer.json"
FORMAT_HINT = ('one JSON object per line with "prompt": "...", "messages": '
               '[{"role": ..., "content": ...}] or "text": "..."')


def _text_of(record: object, where: str) -> str:
    if not isinstance(record, dict):
        raise UsageError(f"{where}: expected a JSON object, got {type(record).__name__}; "
                         f"use {FORMAT_HINT}")
    for key in ("prompt", "text"):
        if isinstance(record.get(key), str):
            return record[key]
    messages = record.get("messages")
    if isinstance(messages, list) and all(
            isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages):
        return "\n".join(m["content"] for m in messages)
    raise UsageError(f"{where}: no \"prompt\", \"messages\" or \"text\" string; use {FORMAT_HINT}")


def read_prompt_texts(path: Path, limit: int = MAX_PROMPTS) -> list[str]:
    """The texts of a prompt file, in file order; UsageError naming file:line on bad input
    (read by the one JSONL reader, ``load.dataset.read_jsonl``)."""
    return [text for text, _record in read_prompt_records(path, limit)]


def read_prompt_records(path: Path, limit: int = MAX_PROMPTS) -> list[tuple[str, dict]]:
    """Each prompt's text and its JSON object as written, in file order (see
    :func:`read_prompt_texts`)."""
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the prompt file: {exc.strerror or exc}") from None
    with handle:
        return read_jsonl(
            handle, lambda number, record: (_text_of(record, f"{path}:{number}"), record),
            bad_json=lambda number, exc: (f"{path}:{number}:{exc.colno}: invalid JSON "
                                          f"({exc.msg}); use {FORMAT_HINT}"),
            comments=True, limit=limit)


@dataclass(frozen=True)
class PromptStats:
    """Token counts of a prompt file."""

    count: int
    median_tokens: int
    max_tokens: int
    how: str  # "tokenizer.json" or "whitespace words"

    @property
    def exact(self) -> bool:
        """Counted in the model's tokenizer (not approximated by words)."""
        return self.how == TOKENIZER_COUNT


def measure_prompt_file(path: Path, model_dir: Path) -> PromptStats:
    """Count each prompt's tokens in the model's tokenizer (or words without one)."""
    texts = read_prompt_texts(path)
    if not texts:
        return PromptStats(0, 0, 0, "empty")
    counter, how = _counter(model_dir)
    lengths = [counter(text) for text in texts]
    return PromptStats(len(texts), int(statistics.median(lengths)), max(lengths), how)


def _counter(model_dir: Path):
    tokenizer_file = model_dir / "tokenizer.json"
    if tokenizer_file.is_file():
        try:
            from tokenizers import Tokenizer
        except ImportError:
            pass
        else:
            tokenizer = Tokenizer.from_file(str(tokenizer_file))
            return (lambda text: len(tokenizer.encode(text).ids)), TOKENIZER_COUNT
    return (lambda text: len(text.split())), "whitespace words (no tokenizer.json)"
