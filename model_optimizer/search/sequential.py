"""The sequential rule: two configurations measured side by side until the interval of their
*difference* answers the question, or the budget is spent. Defined once here; the sweep
settles its choice with it (``sweep/settle.py``) and the tune its winner against the runner-up
(``tune/confirm.py``).

A per-window coefficient of variation says how noisy one window is, not how well a mean is
known: the standard error of a mean falls with the square root of the windows taken. So a
decision between two configurations A and B does not compare one window's noise with the
plateau threshold; it measures A and B **interleaved**, in rounds whose order alternates
(A B, then B A: a linear drift over the server's life falls on both equally), and reads
the **paired** log-ratios ``d_i = log(A_i / B_i)`` of each round:

- :class:`Difference`: the ratio ``exp(mean d)`` with its one-sided interval at
  :data:`CONFIDENCE` (Student's t on ``n - 1`` degrees of freedom, ``n >= MIN_PAIRS``);
- :meth:`Difference.answer`: ``above`` (the whole interval at or above a bound), ``below``
  (wholly below it) or ``open`` (take more windows);
- :meth:`Difference.pairs_needed`: when the budget ran out, how many pairs the measured
  variance says would answer it (the half-width shrinks as ``1/sqrt(n)``);
- :func:`unpaired`: the same question for a value measured apart from the choice (its scan
  windows), with the noise the pairs measured (:func:`window_sd`);
- :func:`drift_of`: a server that speeds up or slows down over its life, from configurations
  read early and again late (``log reading = level + slope * minutes``), reported with its
  interval, and *detected* when that interval excludes zero.

Every answer rests on an interval of the difference, never on the per-window CV.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from functools import cache

#: one-sided confidence of every interval (per look; the simulator measures what the looks
#: cost: calibration, docs/benchmarks/search-simulator.md)
CONFIDENCE = 0.975
#: pairs before a paired interval is read (its variance needs two degrees of freedom)
MIN_PAIRS = 3
#: a drift is reported as detected when its interval excludes zero and it exceeds this
#: (relative change per 10 minutes)
DRIFT_FLOOR = 0.01


@cache
def t_quantile(dof: int, confidence: float = CONFIDENCE) -> float:
    """Student's t quantile (scipy.stats imported on first use: it is slow to import)."""
    from scipy.stats import t as student_t

    return float(student_t.ppf(confidence, max(dof, 1)))


def wrong_below(threshold: float) -> float:
    """The share of the best below which a choice is wrong: ``1 - 2 * threshold`` (0.90 at the
    5% plateau threshold): the bound a resolved choice is shown to clear."""
    return 1.0 - 2.0 * threshold


def log_ratios(pairs: Iterable[tuple[float, float]]) -> list[float]:
    """``log(a / b)`` of each pair with two positive readings."""
    return [math.log(a / b) for a, b in pairs if a > 0 and b > 0]


@dataclass(frozen=True)
class Difference:
    """A/B from paired windows: the ratio, its one-sided interval, the pairs and their sd (log
    units)."""

    ratio: float
    low: float
    high: float
    pairs: int
    sd: float

    @classmethod
    def of(cls, pairs: Sequence[tuple[float, float]],
           confidence: float = CONFIDENCE) -> Difference | None:
        """The interval of the pairs' log-ratio mean; None with fewer than :data:`MIN_PAIRS`."""
        logs = log_ratios(pairs)
        if len(logs) < MIN_PAIRS:
            return None
        mean, sd = statistics.fmean(logs), statistics.stdev(logs)
        half = t_quantile(len(logs) - 1, confidence) * sd / math.sqrt(len(logs))
        return cls(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs), sd)

    def answer(self, bound: float) -> str:
        """``above`` (the interval wholly at or above ``bound``), ``below`` (wholly below) or
        ``open``."""
        if self.low >= bound:
            return "above"
        if self.high < bound:
            return "below"
        return "open"

    def pairs_needed(self, bound: float, confidence: float = CONFIDENCE) -> int | None:
        """Pairs in all that would answer the question at the measured sd, if the ratio stays
        where it is (None when it sits on the bound: no number of windows would)."""
        distance = abs(math.log(self.ratio) - math.log(bound))
        if distance < 1e-9:
            return None
        if self.sd == 0:
            return self.pairs
        needed = (t_quantile(max(self.pairs - 1, 1), confidence) * self.sd / distance) ** 2
        return max(self.pairs, math.ceil(needed))

    def to_dict(self) -> dict:
        """JSON form (the revision's ``validated.decision`` and summary.json; a bound beyond
        what a float holds: None)."""
        return {key: (round(value, 5) if math.isfinite(value) else None)
                if isinstance(value, float) else value for key, value in asdict(self).items()}

    def __str__(self) -> str:
        return (f"{self.ratio:.3f} ({self.low:.3f}..{self.high:.3f}, {self.pairs} pairs, "
                f"one-sided {CONFIDENCE:.1%})")


def window_sd(groups: Iterable[Sequence[float]]) -> tuple[float, int] | None:
    """The noise of one window (log units) and its degrees of freedom, from the log-ratios of
    several comparisons (each group one comparison's pairs): the pooled sd of a pair's
    log-ratio over ``sqrt(2)``; None without two degrees of freedom."""
    squares, dof = 0.0, 0
    for group in groups:
        if len(group) < 2:
            continue
        squares += statistics.variance(group) * (len(group) - 1)
        dof += len(group) - 1
    if dof < 2:
        return None
    return math.sqrt(squares / dof / 2.0), dof


def unpaired(a: Sequence[float], b: Sequence[float], sd: float, dof: int,
             confidence: float = CONFIDENCE) -> Difference | None:
    """A/B from windows measured apart (not in rounds together), with the window noise ``sd``
    (log units, :func:`window_sd`) on ``dof`` degrees of freedom: the ratio of their
    geometric means with ``t * sd * sqrt(1/n_a + 1/n_b)`` either side."""
    a, b = [x for x in a if x > 0], [x for x in b if x > 0]
    if not a or not b:
        return None
    mean = statistics.fmean(math.log(x) for x in a) - statistics.fmean(math.log(x) for x in b)
    half = t_quantile(dof, confidence) * sd * math.sqrt(1 / len(a) + 1 / len(b))
    pairs = min(len(a), len(b))
    return Difference(math.exp(mean), math.exp(mean - half), math.exp(mean + half), pairs,
                      sd * math.sqrt(2.0))


@dataclass(frozen=True)
class Drift:
    """A server's drift: relative change per 10 minutes with its two-sided 95% interval, from
    ``windows`` readings of ``configurations`` read more than once at different times."""

    per_10min: float
    low: float
    high: float
    windows: int
    configurations: int

    @property
    def detected(self) -> bool:
        """True when the interval excludes zero and the drift is at least :data:`DRIFT_FLOOR`."""
        return (self.low > 0 or self.high < 0) and abs(self.per_10min) >= DRIFT_FLOOR

    def to_dict(self) -> dict:
        """JSON form for summary.json and the revision (an unknown bound: None)."""
        return {**{k: (round(v, 5) if math.isfinite(v) else None) if isinstance(v, float)
                   else v for k, v in asdict(self).items()}, "detected": self.detected}

    def sentence(self) -> str:
        """The drift in words."""
        verdict = "detected" if self.detected else "not detected"
        return (f"drift {verdict}: {self.per_10min:+.1%} per 10 min "
                f"({self.low:+.1%}..{self.high:+.1%}, 95%; {self.windows} windows of "
                f"{self.configurations} configurations read early and again late)")


def drift_of(readings: Iterable[tuple[object, float, float]]) -> Drift | None:
    """The drift over ``readings`` (configuration, minute, value): least squares of the log
    readings on time with one level per configuration, over the configurations read at two or
    more times; None when none was (or time does not vary within any)."""
    groups: dict[object, list[tuple[float, float]]] = {}
    for key, minute, value in readings:
        if value > 0:
            groups.setdefault(key, []).append((float(minute), math.log(value)))
    groups = {k: g for k, g in groups.items() if len({m for m, _ in g}) >= 2}
    if not groups:
        return None
    sxx = sxy = 0.0
    count = 0
    for group in groups.values():
        mean_t = statistics.fmean(m for m, _ in group)
        mean_y = statistics.fmean(y for _, y in group)
        sxx += sum((m - mean_t) ** 2 for m, _ in group)
        sxy += sum((m - mean_t) * (y - mean_y) for m, y in group)
        count += len(group)
    slope = sxy / sxx
    dof = count - len(groups) - 1
    if dof < 1:
        return Drift(_per_10min(slope), -math.inf, math.inf, count, len(groups))
    residual = 0.0
    for group in groups.values():
        mean_t = statistics.fmean(m for m, _ in group)
        mean_y = statistics.fmean(y for _, y in group)
        residual += sum((y - mean_y - slope * (m - mean_t)) ** 2 for m, y in group)
    half = t_quantile(dof, 0.975) * math.sqrt(residual / dof / sxx)
    return Drift(_per_10min(slope), _per_10min(slope - half), _per_10min(slope + half), count,
                 len(groups))


def _per_10min(slope: float) -> float:
    """A log-slope per minute as the relative change over 10 minutes."""
    return math.expm1(max(min(slope * 10.0, 50.0), -50.0))


def projection(needed_rounds: int, per_round: int, window_minutes: float) -> dict:
    """What would resolve an open question: ``windows`` more (``needed_rounds`` rounds of
    ``per_round`` windows) and the ``minutes`` they take."""
    windows = max(0, needed_rounds) * per_round
    return {"windows": windows, "minutes": round(windows * window_minutes, 1)}
