"""Sequential paired comparison: two configurations measured interleaved (A B A B ...), and
the interval of their *ratio* from the pairs, so a decision rests on how well the difference
is known, not on how noisy one window is.

A pair is two adjacent windows, one of each configuration, taken back to back on the same
server (or alternating launches): a slow minute on a shared machine hits both, so the
log-ratio ``ln(a_i / b_i)`` of a pair cancels the drift that makes single windows vary by
20-60% here. Over ``n`` pairs with mean ``m`` and standard deviation ``s`` of the
log-ratios, the one-sided 95% lower bound of ``a / b`` is ``exp(m - t(n-1) * s / sqrt(n))``
(Student's t; the bound tightens with the square root of the pairs taken). A search keeps
taking pairs until that bound answers its question (``a`` is at least some share of ``b``)
or its time budget is spent; :meth:`Paired.pairs_to_show` then projects how many pairs would
have answered it at the spread measured so far.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache


@cache
def t95(dof: int) -> float:
    """Student's t one-sided 95% quantile; scipy.stats is imported on first use (0.9 s,
    most of every `mopt` command's start-up, tab completion included)."""
    from scipy.stats import t as student_t

    return float(student_t.ppf(0.95, max(dof, 1)))


@dataclass(frozen=True)
class Paired:
    """The log-ratios of ``n`` pairs of windows (a, b): their mean and standard deviation."""

    n: int
    mean: float
    sd: float

    @classmethod
    def of(cls, pairs: Sequence[tuple[float, float]]) -> Paired | None:
        """From (a, b) readings; None with fewer than two usable pairs (both positive)."""
        logs = [math.log(a / b) for a, b in pairs if a > 0 and b > 0]
        if len(logs) < 2:
            return None
        return cls(len(logs), statistics.fmean(logs), statistics.stdev(logs))

    @property
    def ratio(self) -> float:
        """The geometric mean of a / b over the pairs."""
        return math.exp(self.mean)

    def half_width(self, n: int | None = None) -> float:
        """One-sided 95% half-width of the mean log-ratio (at ``n`` pairs, default now)."""
        n = self.n if n is None else n
        return t95(n - 1) * self.sd / math.sqrt(n)

    def bound(self) -> float:
        """One-sided 95% lower bound of a / b."""
        return math.exp(self.mean - self.half_width())

    def shows(self, share: float) -> bool:
        """True when the pairs show ``a >= share * b`` at one-sided 95%."""
        return self.bound() >= share

    def pairs_to_show(self, share: float, limit: int = 10_000) -> int | None:
        """Pairs in all at which the spread measured so far would show ``a >= share * b``
        (the mean held where it is); None when the mean itself is below ``share``: more
        pairs would not show it."""
        room = self.mean - math.log(share)
        if room <= 0:
            return None
        n = self.n
        while n < limit and self.half_width(n) > room:
            n += 1
        return n if n < limit else None

    def to_dict(self) -> dict:
        """JSON form: the pairs, the ratio and its one-sided 95% lower bound."""
        return {"pairs": self.n, "ratio": round(self.ratio, 4), "low": round(self.bound(), 4),
                "sd_log": round(self.sd, 4)}


def adjacent_pairs(series: Sequence[tuple[object, float]], a: object, b: object,
                   skip: frozenset[int] = frozenset()) -> list[tuple[float, float]]:
    """The (a, b) readings of the interleaved ``series`` of (key, reading): two consecutive
    entries, one of ``a`` and one of ``b`` in either order, make a pair; an entry is used
    once, and the indices in ``skip`` never."""
    pairs, index = [], 0
    while index + 1 < len(series):
        (first, x), (second, y) = series[index], series[index + 1]
        if {index, index + 1} & skip or {first, second} != {a, b}:
            index += 1
            continue
        pairs.append((x, y) if first == a else (y, x))
        index += 2
    return pairs
