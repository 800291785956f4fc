"""A trace as the run's requests: prompts with their sessions' conversations, and the
arrival schedule the client replays (``load.client``).

``trace_items`` returns a ``LazyItems`` of the trace's requests (the first ``num_requests``
when that is set) with a ``replay`` attribute (:class:`Replay`): the send offsets, the
trace's arrival offsets divided by the speed, and the warm-up requests, which are synthetic
prompts sharing nothing with the trace (they warm the engine, not its prefix cache).

A session's turn is sent with the conversation so far in front of its own input: for
completions the earlier turns' prompts and a stand-in text for each earlier output (of that
turn's ``output_tokens``), joined by blank lines; for chat the same as user and assistant
messages. The stand-in is fixed, not the text the server generated, so the shared prefix a
later turn finds cached covers the earlier prompts and stand-ins as sent, never the
generated tokens' blocks (a real chat would hit on those too).
"""

from __future__ import annotations

import statistics
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model_optimizer.errors import UsageError
from model_optimizer.load.items import PREBUILD, LazyItems, WorkItem
from model_optimizer.load.stats import percentile
from model_optimizer.load.trace import Trace, TraceEntry, parse_speed, read_trace

OUTPUT_INDEX = 1 << 40  # stand-in outputs draw their text apart from prompts
WARMUP_INDEX = 1 << 41
TEXT_CACHE = 4096


@dataclass
class Replay:
    """The schedule of a replayed trace (offsets in seconds after the window opens)."""

    offsets: list[float]
    speed: float
    trace_requests: int
    sessions: int
    warmup_item: Callable[[int], WorkItem]

    def figures(self, records: Sequence[Any]) -> dict[str, Any]:
        """The replayed rate against the trace's: the rate the trace's own times give for the
        requests replayed, that rate times the speed (the target), the rate the client sent at,
        and how late each send was against its schedule (relative to the first send)."""
        count = len(self.offsets)
        span = self.offsets[-1] if count else 0.0
        target = (count - 1) / span if span > 0 else None
        sent = sorted((r.index, r.sent_at) for r in records)
        late = []
        if sent:
            first = min(at for _, at in sent)
            late = sorted((at - first - self.offsets[i]) * 1000.0 for i, at in sent
                          if i < count)
        sent_span = (sent[-1][1] - sent[0][1]) if len(sent) > 1 else 0.0
        replayed = (len(sent) - 1) / sent_span if sent_span > 0 else None
        return {
            "trace_requests": self.trace_requests, "replayed_requests": len(sent),
            "sessions": self.sessions, "speed": self.speed,
            "trace_rate_qps": None if target is None else target / self.speed,
            "target_rate_qps": target, "replayed_rate_qps": replayed,
            "send_late_p50_ms": percentile(late, 50), "send_late_p99_ms": percentile(late, 99),
            "send_late_max_ms": max(late) if late else None,
        }


def trace_path(workload: Mapping[str, Any], base_dir: Path | None) -> Path:
    """``workload.trace`` resolved (relative paths start at the recipe's folder)."""
    path = Path(str(workload["trace"])).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    return path


def trace_items(workload: Mapping[str, Any], source: Any, base_dir: Path | None,
                max_model_len: int | None, prebuild: int = PREBUILD) -> LazyItems:
    """The trace's requests as lazy items with their ``replay`` schedule (module docstring)."""
    trace = read_trace(trace_path(workload, base_dir))
    speed = parse_speed(workload.get("trace_speed") or 1)
    limit = workload.get("num_requests")
    entries = trace.entries[:int(limit)] if limit else trace.entries
    builder = _Conversations(trace, source, workload.get("endpoint", "completions") == "chat")
    builder.check_lengths(entries, max_model_len)
    lazy = LazyItems(len(entries), builder.item, prebuild=prebuild)
    lazy.classes = set(trace.classes)
    lazy.replay = Replay([entry.at_s / speed for entry in entries], speed,  # type: ignore
                         len(trace.entries), trace.sessions(), builder.warmup_item)
    return lazy


class _Conversations:
    """Builds request ``i`` of a trace: its session's conversation so far, then its input."""

    def __init__(self, trace: Trace, source: Any, chat: bool) -> None:
        self.trace, self.source, self.chat = trace, source, chat
        self._own: list[int] = []  # each entry's own input length, in tokens
        self._texts: OrderedDict[int, str] = OrderedDict()
        self._lock = threading.Lock()  # the builder thread and the reader both build

    def check_lengths(self, entries: Sequence[TraceEntry], max_model_len: int | None) -> None:
        """Measure every input; UsageError (file:line) for a turn whose conversation does
        not fit ``max_model_len``."""
        context: list[int] = []
        for index, entry in enumerate(self.trace.entries):
            own = entry.prompt_tokens or self.source.text_tokens(entry.prompt)
            self._own.append(own)
            before = 0 if entry.previous is None else context[entry.previous]
            context.append(before + own + entry.output_tokens)
            if max_model_len is not None and index < len(entries) \
                    and context[-1] > max_model_len:
                raise UsageError(
                    f"{self.trace.path}:{entry.line}: turn {entry.turn + 1} of session "
                    f"{entry.session!r} needs about {context[-1]} tokens (the conversation so "
                    f"far, its input and output), over engine.max_model_len {max_model_len}; "
                    "raise max_model_len or end the session earlier" if entry.session else
                    f"{self.trace.path}:{entry.line}: the request needs about {context[-1]} "
                    f"tokens (input and output), over engine.max_model_len {max_model_len}; "
                    "raise max_model_len or lower its output_tokens")

    def item(self, index: int) -> WorkItem:
        entry = self.trace.entries[index]
        chain = [index]
        while (previous := self.trace.entries[chain[-1]].previous) is not None:
            chain.append(previous)
        chain.reverse()
        turns = []
        for position in chain:
            turns.append(("user", self._text(position)))
            if position != index:
                turns.append(("assistant", self._stand_in(position)))
        if self.chat:
            prompt: Any = [{"role": role, "content": text} for role, text in turns]
            measured = self.source.chat_prompt_tokens(prompt)
        else:
            prompt = "\n\n".join(text for _, text in turns)
            measured = self.source.server_prompt_tokens(prompt)
        return WorkItem(prompt, entry.output_tokens, entry.request_class, measured)

    def warmup_item(self, index: int) -> WorkItem:
        """A warm-up request: a synthetic prompt of the trace's median input and output."""
        own = max(1, int(statistics.median(self._own)))
        output = max(1, int(statistics.median(e.output_tokens for e in self.trace.entries)))
        if self.chat:
            prompt: Any = self.source.chat_prompt(WARMUP_INDEX + index, own)
            return WorkItem(prompt, output, None, self.source.chat_prompt_tokens(prompt))
        text = self.source.completion_prompt(WARMUP_INDEX + index, own)
        return WorkItem(text, output, None, self.source.server_prompt_tokens(text))

    def _text(self, index: int) -> str:
        entry = self.trace.entries[index]
        if entry.prompt is not None:
            return entry.prompt
        return self._cached(index, lambda: self.source.completion_prompt(index,
                                                                         entry.prompt_tokens))

    def _stand_in(self, index: int) -> str:
        tokens = self.trace.entries[index].output_tokens
        return self._cached(OUTPUT_INDEX + index,
                            lambda: self.source.completion_prompt(OUTPUT_INDEX + index, tokens))

    def _cached(self, key: int, make: Callable[[], str]) -> str:
        with self._lock:
            text = self._texts.get(key)
            if text is not None:
                self._texts.move_to_end(key)
                return text
        text = make()  # deterministic: a race builds the same text twice
        with self._lock:
            self._texts[key] = text
            if len(self._texts) > TEXT_CACHE:
                self._texts.popitem(last=False)
        return text
