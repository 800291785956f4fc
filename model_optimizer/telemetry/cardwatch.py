"""The warm-up's wait for a steady card: the rule of :mod:`.thermal` applied as samples come.

The steady warm-up (``load/warmup.py``) polls a :class:`CardWatch` beside its throughput
rounds and ends only when both are done. The watch reads the thermals the window's
telemetry sampler takes anyway (``gpu_thermals`` of each sample, every 0.5 s), so no second
NVML reader runs. It is done when:

- the card is **steady** (:func:`.thermal.card_steady` over the samples since the warm-up
  began);
- ``max_s`` seconds passed without that: ``card not steady after N s``; the run goes on and
  its figures carry that verdict (``metrics.json`` ``warmup.card``), flagged, not dropped;
- there is nothing to judge: **no NVML** (no NVIDIA driver: a CPU machine), or NVML
  answers neither a temperature nor an SM clock. Not an error: the verdict says ``not
  checked`` and why, and the log says it once per process.

Times are wall-clock epoch seconds (the samples' ``t``); ``clock`` lets tests drive it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from model_optimizer.telemetry.thermal import (
    RULE,
    CardVerdict,
    ThermalSample,
    card_steady,
    describe_window,
    samples_of,
)

logger = logging.getLogger(__name__)

STEADY = "steady"
NO_NVML = "not checked: no NVML (no NVIDIA GPU seen)"
NO_READINGS = "not checked: NVML reports neither a temperature nor an SM clock"
_told: set[str] = set()  # what the log said already (once per process)


def not_steady_after(max_s: float) -> str:
    """The verdict of a card that did not settle within the bound."""
    return f"card not steady after {max_s:g} s"


def _say_once(verdict: str) -> None:
    if verdict not in _told:
        _told.add(verdict)
        logger.info("warm-up: card %s", verdict)


class CardWatch:
    """Whether the card is warm and steady yet (``load.warmup.CardGate``).

    ``source`` returns the telemetry samples so far (a list the sampler appends to);
    ``nvml`` says whether NVML answered at all; ``max_s`` bounds the wait.
    """

    def __init__(self, source: Callable[[], Sequence[Mapping[str, Any]]], max_s: float, *,
                 nvml: bool, clock: Callable[[], float] = time.time) -> None:
        self.source, self.max_s, self.nvml, self.clock = source, float(max_s), nvml, clock
        self.started: float | None = None
        self.ended: float | None = None
        self.verdict: str | None = None
        self.last: CardVerdict | None = None
        self._read = 0  # how many samples of the source were read
        self._samples: list[ThermalSample] = []

    def begin(self) -> None:
        """The warm-up starts now: only samples from here on count."""
        self.started = self.clock()
        if not self.nvml:
            self._decide(NO_NVML, self.started)

    def _decide(self, verdict: str, now: float) -> None:
        self.verdict, self.ended = verdict, now
        if verdict in (NO_NVML, NO_READINGS):
            _say_once(verdict)

    def _new_samples(self) -> bool:
        series = self.source()
        fresh = series[self._read:]
        self._read = len(series)
        assert self.started is not None
        self._samples += [s for s in samples_of(fresh) if s.t >= self.started]
        return bool(fresh)

    def done(self) -> bool:
        """Judge the samples that arrived since the last call; True once decided."""
        if self.verdict is not None:
            return True
        if self.started is None:
            self.begin()
            return self.verdict is not None
        now = self.clock()
        if self._new_samples() and self._samples:
            self.last = card_steady(self._samples, now)
            if self.last.steady:
                self._decide(STEADY, now)
            elif not self.last.known:
                self._decide(NO_READINGS, now)
        assert self.started is not None
        if self.verdict is None and now - self.started >= self.max_s:
            self._decide(not_steady_after(self.max_s), now)
        return self.verdict is not None

    @property
    def steady(self) -> bool | None:
        """True steady, False not steady within the bound, None not checked (or undecided)."""
        if self.verdict == STEADY:
            return True
        return None if self.verdict in (None, NO_NVML, NO_READINGS) else False

    def summary(self) -> dict[str, Any]:
        """What the warm-up figures record of the card (``warmup.card``)."""
        seconds = None
        if self.started is not None and self.ended is not None:
            seconds = round(self.ended - self.started, 2)
        return {"verdict": self.verdict, "steady": self.steady, "seconds": seconds,
                "max_s": self.max_s, "reason": self.last.reason if self.last else None,
                "rule": RULE}


def card_line(metrics: Mapping[str, Any]) -> str | None:
    """The window's cards in words for its report: ``card: GPU 0 62-63 C, SM 1410-1455 MHz
    (mean 1431); warm-up: steady after 12 s``, or ``CARD NOT STEADY: card not steady after
    120 s (...)``; None when no card was read (a CPU run)."""
    window = describe_window(metrics.get("thermals"))
    if window is None:
        return None
    card = (metrics.get("warmup") or {}).get("card") or {}
    if card.get("steady") is True:
        return f"card: {window}; warm-up: steady after {card.get('seconds')} s"
    if card.get("steady") is False:
        return (f"CARD NOT STEADY: {card.get('verdict')} ({card.get('reason')}); the window's "
                f"cards: {window}")
    return f"card: {window}; warm-up: {card.get('verdict') or 'no card check'}"
