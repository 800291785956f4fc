"""What each request of a run sends: fixed synthetic prompts, a mix of classes, or a file.

``work_items(workload, tokenizer_dir, ...)`` returns a lazy sequence of ``WorkItem``: item
``i`` is a pure function of (workload, seed, i), built when first needed, so a run of a
million requests starts at once and holds a bounded window of prompts in memory. The first
``PREBUILD`` items are built before the load starts; a background thread keeps
``LOOKAHEAD`` items ahead of the client so fitting a long prompt does not stall the event
loop that times the streams.

The forms (``workload.mix``, ``workload.dataset`` and ``workload.trace`` exclude each other):

- fixed: ``prompt_tokens`` / ``output_tokens`` / ``shared_prefix_tokens`` (no class);
- mix: ``workload.mix`` classes (``mix``), prompts fitted to each drawn length;
- dataset: ``workload.dataset`` (``load.dataset``), sampled with the workload seed with or
  without replacement; every entry's length measured in the model's tokenizer up front;
- trace: ``workload.trace`` (``load.replay``): the trace's requests in arrival order, with
  the schedule the client replays them at (``items.replay``).
"""

from __future__ import annotations

import base64
import contextlib
import os
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from model_optimizer.errors import UsageError
from model_optimizer.httpcall import basic_auth_header
from model_optimizer.load.dataset import DatasetEntry, read_dataset
from model_optimizer.load.items import PREBUILD, LazyItems, WorkItem
from model_optimizer.mix import MixSampler, parse_mix

UNBOUNDED = 10**9  # length of a duration-bound load's sequence (never reached)


def work_items(workload: Mapping[str, Any], tokenizer_dir: str, count: int | None, *,
               base_dir: Path | None = None, max_model_len: int | None = None,
               prebuild: int = PREBUILD) -> LazyItems:
    """The lazy request sequence of ``workload`` (``count`` None: duration-bound)."""
    from model_optimizer.load.prompts import PromptSource

    length = count or UNBOUNDED
    chat = workload.get("endpoint", "completions") == "chat"
    seed = int(workload.get("seed") or 0)
    if workload.get("trace"):  # its own length: the trace's requests (load.replay)
        from model_optimizer.load.replay import trace_items
        return trace_items(workload, PromptSource(tokenizer_dir, 1, 0, seed), base_dir,
                           max_model_len, prebuild)
    if workload.get("dataset"):
        source = PromptSource(tokenizer_dir, 1, 0, seed)
        items = measure_dataset(workload, source, base_dir, max_model_len)
        lazy = LazyItems(length, dataset_picker(items, workload["dataset"], seed),
                         prebuild=prebuild)
        lazy.classes = {item.request_class for item in items if item.request_class}
        return lazy
    if workload.get("mix"):
        try:
            sampler = MixSampler(parse_mix(workload["mix"]), seed)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        source = PromptSource(tokenizer_dir, 1, 0, seed)

        def build_mix(index: int) -> WorkItem:
            draw = sampler.draw(index)
            if chat:  # lengths below the template's (or special tokens') minimum are raised
                prompt: Any = source.chat_prompt(index, draw.prompt_tokens)
                measured = source.chat_prompt_tokens(prompt)
            else:
                prompt = source.completion_prompt(index, draw.prompt_tokens)
                measured = source.server_prompt_tokens(prompt)
            return WorkItem(prompt, draw.output_tokens, draw.request_class, measured)
        lazy = LazyItems(length, build_mix, prebuild=prebuild)
        lazy.classes = {request_class.name for request_class in sampler.classes}
        return lazy
    source = PromptSource(tokenizer_dir, workload["prompt_tokens"],
                          workload.get("shared_prefix_tokens") or 0, seed)
    output_tokens = int(workload["output_tokens"])

    def build_fixed(index: int) -> WorkItem:
        if chat:
            return WorkItem(source.chat_prompt(index), output_tokens, None,
                            source.expected_chat_prompt_tokens)
        return WorkItem(source.completion_prompt(index), output_tokens, None,
                        source.expected_server_prompt_tokens)
    return LazyItems(length, build_fixed, prebuild=prebuild)


def measure_dataset(workload: Mapping[str, Any], source: Any, base_dir: Path | None,
                    max_model_len: int | None) -> list[WorkItem]:
    """Every entry of the workload's dataset as a WorkItem, lengths in the model's tokens.

    UsageError (file:line) for a chat entry on the completions endpoint and for a request
    that does not fit ``max_model_len``.
    """
    spec = workload["dataset"]
    path = Path(spec["path"]).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    chat = workload.get("endpoint", "completions") == "chat"
    default_output = int(workload["output_tokens"])
    items = []
    for entry in read_dataset(path, spec.get("format")):
        items.append(_entry_item(entry, path, source, chat, default_output, max_model_len))
    return items


def _entry_item(entry: DatasetEntry, path: Path, source: Any, chat: bool,
                default_output: int, max_model_len: int | None) -> WorkItem:
    where = f"{path}:{entry.line}"
    if entry.messages is not None and not chat:
        raise UsageError(f"{where}: a chat ('messages') entry needs workload.endpoint: chat")
    if chat:
        messages = list(entry.messages or [{"role": "user", "content": entry.prompt}])
        prompt: Any = messages
        prompt_tokens = source.chat_prompt_tokens(messages)
    else:
        prompt = entry.prompt
        prompt_tokens = source.server_prompt_tokens(entry.prompt)
    output_tokens = entry.output_tokens
    if output_tokens is None and entry.output_text is not None:
        output_tokens = max(1, source.text_tokens(entry.output_text))
    output_tokens = output_tokens or default_output
    if max_model_len is not None and prompt_tokens + output_tokens > max_model_len:
        what = "prompt alone" if prompt_tokens >= max_model_len else "prompt + output"
        raise UsageError(
            f"{where}: the {what} ({prompt_tokens} + {output_tokens} tokens) does not fit "
            f"engine.max_model_len {max_model_len}; raise max_model_len, lower the line's "
            "output_tokens, or drop the line")
    return WorkItem(prompt, output_tokens, entry.request_class, prompt_tokens)


def dataset_picker(items: list[WorkItem], spec: Mapping[str, Any],
                   seed: int) -> Callable[[int], WorkItem]:
    """Request ``i`` -> an entry: seeded sampling with or without replacement.

    Without replacement every entry is used once per pass, each pass in a fresh seeded
    order; with replacement each request draws independently.
    """
    count = len(items)
    if spec.get("sampling", "without_replacement") == "with_replacement":
        return lambda index: items[random.Random(f"mopt-data:{seed}:{index}").randrange(count)]
    orders: dict[int, list[int]] = {}

    def pick(index: int) -> WorkItem:
        epoch = index // count
        order = orders.get(epoch)
        if order is None:  # one pass cached (the reader and the builder thread may race)
            order = list(range(count))
            random.Random(f"mopt-data-pass:{seed}:{epoch}").shuffle(order)
            orders.clear()
            orders[epoch] = order
        return items[order[index % count]]
    return pick


def prompts_needed(workload: Mapping[str, Any]) -> int | None:
    """Distinct prompts a run consumes, or None when bounded only by duration."""
    if workload.get("num_requests") is None:
        return None
    return int(workload.get("warmup_requests") or 0) + int(workload["num_requests"])


def api_headers(workload: Mapping[str, Any], base_url: str = "") -> dict[str, str]:
    """``Authorization: Bearer <key>`` read from the variable ``workload.api_key_env`` names,
    or ``Basic`` from ``base_url``'s ``user:password@`` (``httpcall.basic_auth_header``).

    The recipe and the archive hold only the variable's name, never its value. A URL with
    user info and an API key variable is a UsageError: a request carries one Authorization.
    """
    basic = basic_auth_header(base_url) if base_url else {}
    name = workload.get("api_key_env")
    if not name:
        return basic
    if basic:
        raise UsageError("--url carries user:password@ and workload.api_key_env names an API "
                         "key: a request carries one Authorization header; drop the user info "
                         "from --url or the API key variable")
    value = os.environ.get(name)
    if not value:
        raise UsageError(f"workload.api_key_env names {name}, which is not set (or empty) in "
                         f"mopt's environment; export {name}=<key> first")
    return {"Authorization": f"Bearer {value}"}


def header_secrets(headers: Mapping[str, str]) -> list[str]:
    """The credentials in ``headers`` (to scrub them from whatever a server echoes back)."""
    found = []
    for value in headers.values():
        scheme, _, credential = value.partition(" ")
        found.append(credential or scheme)
        if scheme == "Basic":
            with contextlib.suppress(ValueError):
                found.append(base64.b64decode(credential).decode().partition(":")[2])
    return [value for value in found if value]


def prepare_items(workload: Mapping[str, Any], tokenizer_dir: str, count: int | None,
                  base_dir: Path | None = None, *, max_model_len: int | None = None,
                  classes: Iterable[str] = ()) -> LazyItems:
    """The run's requests, checked before any server is started.

    UsageError when the dataset is broken, a request does not fit ``max_model_len`` (the
    recipe's ``engine.max_model_len``), or ``classes`` (those ``slo.classes`` names) holds
    a class no request carries.
    """
    items = work_items(workload, tokenizer_dir, count, base_dir=base_dir,
                       max_model_len=max_model_len)
    missing = sorted(set(classes) - items.classes)
    if missing:
        items.close()
        where = (f"the dataset {workload['dataset']['path']}" if workload.get("dataset")
                 else f"the trace {workload['trace']}" if workload.get("trace")
                 else "this workload")
        raise UsageError(f"slo.classes names {', '.join(missing)}, but no request of {where} "
                         f"has that class (classes: {', '.join(sorted(items.classes)) or 'none'})"
                         "; fix the class name or label the lines with \"class\"")
    return items


class ItemsFrom(Sequence):
    """``items[start:]`` without copying: the next window of a search continues the sequence.

    ``classes`` and ``close`` are those of the underlying items (closing is the owner's job).
    """

    def __init__(self, items: LazyItems, start: int) -> None:
        self.items, self.start = items, start
        self.classes = items.classes

    def __len__(self) -> int:
        return len(self.items) - self.start

    def __getitem__(self, index: int) -> WorkItem:  # type: ignore[override]
        return self.items[self.start + index]

    def close(self) -> None:
        """Nothing to do: the underlying items belong to the caller."""
