"""The request sequence a load consumes: ``WorkItem`` (one request) and ``LazyItems`` (a
bounded, lazily built sequence of them). ``load.workload`` builds them from a workload's form,
``load.replay`` from a trace.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

PREBUILD = 1024
LOOKAHEAD = 1024


@dataclass(frozen=True)
class WorkItem:
    """One request to send: text (completions) or chat messages, and its lengths."""

    prompt: str | list[dict[str, str]]
    output_tokens: int
    request_class: str | None = None
    prompt_tokens: int | None = None  # as the server counts them, when known
    #: what a client of a routed fleet labels the request with (``fleet.router``): the model
    #: name it asks for (None: the run's) and tags sent as ``"tags"`` in the body
    model: str | None = None
    tags: tuple[str, ...] = ()


class LazyItems(Sequence):
    """A sequence whose items are built on demand, ahead of the reader, within bounds."""

    def __init__(self, length: int, build: Callable[[int], WorkItem], *,
                 prebuild: int = PREBUILD, lookahead: int = LOOKAHEAD) -> None:
        if length < 1:
            raise ValueError("a load needs at least one request")
        self._length, self._build, self._lookahead = length, build, lookahead
        self._cache: dict[int, WorkItem] = {}
        self._cond = threading.Condition()
        self._read_up_to = 0
        self._closed = False
        self._error: BaseException | None = None
        for index in range(min(length, prebuild)):
            self._cache[index] = build(index)
        self._next = min(length, prebuild)
        self._building: int | None = None
        self.classes: set[str] = set()  # class names the items can carry
        self._thread: threading.Thread | None = None
        if self._next < length:
            self._thread = threading.Thread(target=self._produce, name="mopt-prompts",
                                            daemon=True)
            self._thread.start()

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, index: int) -> WorkItem:  # type: ignore[override]
        if not isinstance(index, int):
            raise TypeError("LazyItems takes integer indices")
        if not 0 <= index < self._length:
            raise IndexError(index)
        with self._cond:
            self._read_up_to = max(self._read_up_to, index)
            self._cond.notify_all()
            while index not in self._cache and index == self._building and self._error is None:
                self._cond.wait(0.5)
            item = self._cache.get(index)
            self._evict()
        return item if item is not None else self._build(index)

    def close(self) -> None:
        """Stop the background builder (idempotent)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _evict(self) -> None:
        floor = self._read_up_to - self._lookahead
        if floor > 0 and len(self._cache) > 2 * self._lookahead:
            for key in [k for k in self._cache if k < floor]:
                del self._cache[key]

    def _produce(self) -> None:
        while True:
            with self._cond:
                while (not self._closed and self._next < self._length
                       and self._next > self._read_up_to + self._lookahead):
                    self._cond.wait()
                if self._closed or self._next >= self._length:
                    return
                index = self._building = self._next
            try:
                item = self._build(index)
            except BaseException as exc:  # the reader rebuilds inline and sees it raise
                with self._cond:
                    self._error, self._building = exc, None
                    self._cond.notify_all()
                return
            with self._cond:
                self._cache[index] = item
                self._next, self._building = index + 1, None
                self._cond.notify_all()
