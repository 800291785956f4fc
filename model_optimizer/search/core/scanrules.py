"""The pure rules a search on a scan server shares (no runner, no engine): how far to lower
the scan ceiling after a launch failed for memory, and when one reading lies below another.

- :func:`lower_ceiling`: after a server launched with ``max_num_seqs = F`` failed to start
  for memory (vLLM's out-of-memory or KV-cache start failures), the next server is launched
  halfway from the highest level known to have started (none: from 0) to ``F``: bisection
  between what started and what did not, never below the range's low end. The sweep's
  sweep's scanning strategies relaunch their scan server once at the lowered ceiling
  (:data:`MAX_SCAN_SERVERS`, in the search simulator too), and the tune lowers the scan
  ceiling of its later trials with it.
- :class:`Reading`: a figure with its 95% interval; ``a.below(b)`` when the intervals are
  disjoint with ``a`` under ``b`` (the same test the tune's scan stops at as a regression,
  and its confirmation checks a confirming run against the scan figure with).
- :func:`fell_short`: the confirmation's one shortfall rule, for the sweep's sustained run
  and the tune's confirming launch alike: a confirming reading says the search's figure did
  not hold up when both have a measured interval and the confirmation's lies wholly below.
- :func:`pooled_cv`: the noise of a search, the coefficient of variation pooled over the
  configurations it measured more than once (the sweep's re-measured values, the tune's
  levels scanned by several trials and its confirming launches); a choice made at a noise
  above the plateau threshold is not resolved, in both.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from model_optimizer.engine.classify import MEMORY_CLASSES

#: scan servers one sweep may launch: the ceiling, and one lowered after a memory failure
MAX_SCAN_SERVERS = 2


def lower_ceiling(failed: int, started: int | None, low: int) -> int:
    """The next scan ceiling after a launch at ``failed`` did not start for memory: halfway
    from ``started`` (the highest level known to have started below ``failed``; None: 0)
    to ``failed``, at least ``low`` and at least ``started``."""
    floor = started if started is not None and started < failed else 0
    return max(low, floor, (floor + failed) // 2)


def lowered_ceiling(failure_kind: str | None, ceiling: int, low: int) -> int | None:
    """The sweep's next scan ceiling after the server at ``ceiling`` failed to start with
    ``failure_kind``: :func:`lower_ceiling` with nothing known to have started, for a memory
    failure only; None when the failure says nothing of memory or the ceiling cannot go
    lower than ``low``."""
    if failure_kind not in MEMORY_CLASSES:
        return None
    lowered = lower_ceiling(ceiling, None, low)
    return lowered if lowered < ceiling else None


@dataclass(frozen=True)
class Reading:
    """A figure and the half-width of its 95% interval (0: a point without noise; None: the
    window gave no interval, so the reading is compared as a point but proves nothing)."""

    value: float
    half_width: float | None = 0.0

    @classmethod
    def of(cls, samples: Sequence[float], half_width: float | None) -> Reading:
        """The median of ``samples`` with ``half_width``."""
        return cls(float(statistics.median(samples)), half_width)

    @property
    def known(self) -> bool:
        """True when the interval is known (a half-width was measured)."""
        return self.half_width is not None

    @property
    def low(self) -> float:
        """The interval's lower end."""
        return self.value - (self.half_width or 0.0)

    @property
    def high(self) -> float:
        """The interval's upper end."""
        return self.value + (self.half_width or 0.0)

    def below(self, other: Reading) -> bool:
        """True when this interval lies wholly below ``other``'s (disjoint intervals)."""
        return self.high < other.low

    def __str__(self) -> str:
        if not self.half_width:
            return f"{self.value:.4g}"
        return f"{self.value:.4g} ± {self.half_width:.2g}"


def fell_short(confirmed: Reading | None, searched: Reading | None) -> bool:
    """True when ``confirmed`` (a confirming run's reading) says ``searched`` (the figure the
    search chose by) did not hold up: both intervals measured, ``confirmed`` wholly below.
    A reading without an interval, or none at all, is no evidence either way."""
    return (confirmed is not None and searched is not None and confirmed.known
            and searched.known and confirmed.below(searched))


def pooled_cv(groups: Iterable[Sequence[float]]) -> dict | None:
    """The coefficient of variation pooled over the groups of two or more readings (each
    group one configuration's figures), weighted by their degrees of freedom, with the
    number of groups (``values``) and readings (``windows``) behind it; None when no group
    has two readings with a positive mean."""
    squares = dof = 0.0
    values = windows = 0
    for group in groups:
        if len(group) < 2:
            continue
        mean = statistics.fmean(group)
        if mean <= 0:
            continue
        squares += statistics.variance(group) / mean ** 2 * (len(group) - 1)
        dof += len(group) - 1
        values, windows = values + 1, windows + len(group)
    if not dof:
        return None
    return {"cv": math.sqrt(squares / dof), "values": values, "windows": windows}


def noise_above(noise: dict | None, threshold: float) -> bool:
    """True when a measured noise (:func:`pooled_cv`) is above the plateau ``threshold``:
    a choice made at that noise is not resolved (sweep and tune alike)."""
    return noise is not None and noise["cv"] > threshold
