"""Does the chosen level meet the SLO? Judged over every window, not on the one that passed.

A sweep's up pass stops at the first level whose window misses the SLO, and the fit keeps
only the windows that met it. One window is one draw: at the simulator's SLO edge with CV 60%
window-to-window noise, a level 30% past the edge reads "met" about a third of the time, a
scan walked past the edge on one lucky window, and the knee chosen above it was called
resolved (20.7% of resolved choices, 2026-12-07). Here the choice must show that it meets the
SLO over all the windows near it.

Each window carries its worst latency figure over its bound (``slo_ratio``, 1.0 at the bound;
:func:`model_optimizer.load.stats.slo_ratio`). On log ratios:

- the **estimate** at the chosen value ``c`` is its own windows' mean when ``c`` was
  measured, else the chord between the nearest measured levels below and above it
  (``l < c < h``, linear in log level). Latency grows with the level and is convex in
  log-log (a step time linear in the batch, then a queue), so the chord lies above the curve:
  the estimate errs high, never low;
- the **noise** is the pooled within-level variance of the levels measured more than once
  (a time drift or a level's slope does not inflate it); with none, the noise is unknown and
  nothing is shown;
- the **bound** is one-sided at :data:`ALPHA`: the estimate plus half the variance (the mean
  of a lognormal reading, not its median: the conservative of the two) plus Student's t on
  the pooled degrees of freedom times the estimate's standard error. The SLO is shown met
  when the bound is below 1.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

#: one-sided level, as the knee's share test (``search/core/sharetest.py``)
ALPHA = 0.025
#: more windows than this many times those taken are not promised (the value reads at the edge)
MAX_GROWTH = 16.0


@dataclass(frozen=True)
class SloCheck:
    """One-sided bounds on a value's worst latency over its bound, from the windows near it."""

    value: int
    estimate: float | None    # the ratio the windows put at the value (1.0: at the bound)
    centre: float | None      # the log of the mean reading (None: the noise is unknown)
    half: float | None        # the one-sided half-width around it, in log
    levels: tuple[int, ...]   # the measured levels the estimate rests on
    windows: int              # their windows

    @classmethod
    def from_dict(cls, data: dict) -> SloCheck:
        """From its ``asdict`` form (the levels back to a tuple)."""
        return cls(**{**data, "levels": tuple(data["levels"])})

    @property
    def bound(self) -> float | None:
        """The upper bound on the mean ratio (None: not known)."""
        if self.centre is None or self.half is None:
            return None
        return math.exp(self.centre + self.half)

    @property
    def low(self) -> float | None:
        """The lower bound on the mean ratio (None: not known)."""
        if self.centre is None or self.half is None:
            return None
        return math.exp(self.centre - self.half)

    @property
    def shown(self) -> bool:
        """The SLO is met at the value at :data:`ALPHA`."""
        return self.bound is not None and self.bound < 1.0

    @property
    def missed(self) -> bool:
        """The SLO is missed at the value at :data:`ALPHA`."""
        return self.low is not None and self.low > 1.0

    @property
    def judged_met(self) -> bool:
        """Its windows' mean reading is within the bound (the point estimate, not shown)."""
        if self.estimate is None:
            return False
        return (math.log(self.estimate) if self.centre is None else self.centre) <= 0

    def more_windows(self, toward_miss: bool = False) -> int:
        """Windows that would show it met (``toward_miss``: missed), the half-width falling
        as the square root of the windows; 0 when it is, when it reads the other way, or
        when it would take more than :data:`MAX_GROWTH` times the windows taken."""
        if self.centre is None or self.half is None or self.half <= 0:
            return 0
        distance = self.centre if toward_miss else -self.centre
        if distance <= 0 or distance >= self.half or (self.half / distance) ** 2 > MAX_GROWTH:
            return 0
        return max(1, math.ceil(self.windows * ((self.half / distance) ** 2 - 1)))

    def words(self) -> str:
        """The check in one clause."""
        if self.estimate is None:
            return "its SLO is not shown met: no level at or above it was measured"
        if self.bound is None:
            return (f"its SLO is not shown met: no level was measured twice, so the latency's "
                    f"window-to-window noise is unknown (reads {self.estimate:.2f} of the "
                    "bound)")
        head = (f"its SLO is {'shown' if self.shown else 'not shown'} met: the worst latency "
                f"reads {self.estimate:.2f} of its bound, at most {self.bound:.2f} at "
                f"one-sided {1 - ALPHA:.1%} ({self._where()})")
        if self.shown:
            return head
        more = self.more_windows()
        if not more:
            return head + "; the value reads at the SLO's edge, more windows will not show it"
        return head + f"; about {more} more windows there would show it"

    def edge_words(self, top: int) -> str:
        """The clause for the level that bounds a scan's range, not shown to miss, whose
        range up to ``top`` (exclusive) may be feasible."""
        reads = f"reads {self.estimate:.2f} of its bound" if self.estimate is not None else ""
        if reads and self.low is not None:
            reads += f", at least {self.low:.2f} at one-sided {1 - ALPHA:.1%}, {self._where()}"
        return (f"the level that bounds the range, {self.value}, missed its SLO but is not "
                f"shown to miss it ({reads or 'its noise unknown'}), and the range up to "
                f"{top - 1} may hide the best")

    def _where(self) -> str:
        """The windows and levels behind the estimate."""
        return f"{self.windows} windows at {' and '.join(str(v) for v in self.levels)}"


def slo_check(value: int, readings: Iterable[tuple[float, float]]) -> SloCheck | None:
    """The check of ``value`` from ``(level, ratio)`` readings, one per window; None without
    readings (the SLO sets no latency bound)."""
    by_level: dict[float, list[float]] = {}
    for level, ratio in readings:
        by_level.setdefault(float(level), []).append(math.log(max(float(ratio), 1e-9)))
    if not by_level:
        return None
    brackets = _brackets(float(value), sorted(by_level))
    if brackets is None:
        return SloCheck(value, None, None, None, (), 0)
    weights = _weights(float(value), brackets)
    pairs = list(zip(brackets, weights, strict=True))
    estimate = sum(w * statistics.fmean(by_level[b]) for b, w in pairs)
    variance, df = _pooled_variance(by_level.values())
    levels = tuple(int(b) for b in dict.fromkeys(brackets))
    count = sum(len(by_level[b]) for b in dict.fromkeys(brackets))
    if df == 0:
        return SloCheck(value, math.exp(estimate), None, None, levels, count)
    spread = math.sqrt(variance * sum(w * w / len(by_level[b])
                                      for b, w in pairs))
    from scipy.stats import t as student_t  # (0.3 s to import: only once a knee is judged)
    half = float(student_t.ppf(1 - ALPHA, df)) * spread
    return SloCheck(value, math.exp(estimate), estimate + variance / 2, half, levels, count)


def _brackets(value: float, levels: list[float]) -> tuple[float, float] | None:
    """The measured levels nearest ``value`` below and above (the value twice when it was
    measured); None when none lies at or above it."""
    above = [level for level in levels if level >= value]
    if not above:
        return None
    below = [level for level in levels if level <= value]
    return (below[-1] if below else above[0]), above[0]


def _weights(value: float, brackets: tuple[float, float]) -> tuple[float, float]:
    """The chord's weights on the lower and upper bracket (linear in log level)."""
    low, high = brackets
    if high == low:
        return 1.0, 0.0
    upper = math.log(value / low) / math.log(high / low)
    return 1.0 - upper, upper


def _pooled_variance(groups: Iterable[list[float]]) -> tuple[float, int]:
    """Pooled within-level variance of the log ratios and its degrees of freedom."""
    squares, df = 0.0, 0
    for logs in groups:
        if len(logs) > 1:
            mean = statistics.fmean(logs)
            squares += sum((x - mean) ** 2 for x in logs)
            df += len(logs) - 1
    return (squares / df if df else 0.0), df
