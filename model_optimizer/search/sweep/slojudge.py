"""A fitted knee judged on the SLO over every window (``search/core/slocheck.py``).

A scan's up pass stops at the first level whose one window misses the SLO. Where the SLO is
noisy, one window misleads it two ways:

- **past the edge**: a level beyond the SLO's edge reads "met" once, the range grows past the
  edge and the knee is chosen there. The knee is resolved only when its value is shown to
  meet the SLO over the windows near it, the misses included
  (:meth:`~model_optimizer.search.core.fit.Knee.with_slo`);
- **short of the edge**: a level that meets the SLO reads "missed" once and bounds the range
  below the true best, which the share test (over the measured range) cannot see. The range
  is judged on all the windows of each level above it (:func:`judged_range`: a level whose
  mean reading is within the bound joins it), and unless the first level beyond is shown to
  miss, the range up to the first level shown to miss (or the scan's ceiling) may be feasible:
  the knee is resolved only when the fitted curve cannot rise past the margin there (the
  cut-range rule of a lowered memory ceiling,
  :func:`~model_optimizer.search.core.cutrange.cut_hides`). Until then the narrowing rounds
  (``search/sweep/fitscan.py``) measure the levels that settle it (:attr:`Knee.remeasure`):
  the bounding level again, and the gap above it bisected.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from model_optimizer.search.core.fit import Knee
from model_optimizer.search.core.slocheck import SloCheck, slo_check
from model_optimizer.search.sweep.model import STATUS_OK, Point

Reading = tuple[float, float]


def slo_readings(history: Sequence[Point]) -> list[Reading]:
    """Every measured window's (level, worst latency over its SLO bound), the windows that
    missed the SLO included."""
    return [(float(p.value), ratio) for p in history if p.status == STATUS_OK
            for ratio in p.slo_ratios]


def judged_range(history: Sequence[Point], usable: list[int], readings: list[Reading]
                 ) -> list[int]:
    """``usable`` and the measured levels above it, in order, while each was measured fine
    (no failure, no preemption) and its windows' mean reading is within the SLO."""
    judged = list(usable)
    for level in sorted({int(p.value) for p in history if usable and _level(p) > usable[-1]}):
        points = [p for p in history if _level(p) == level]
        check = slo_check(level, readings)
        fine = all(p.status == STATUS_OK and not p.preemptions for p in points)
        if not fine or check is None or not check.judged_met:
            break
        judged.append(level)
    return judged


def slo_judged(knee: Knee, history: Sequence[Point], judged: list[int], ceiling: int | None,
               readings: list[Reading], hides: Callable[[int], bool]) -> Knee:
    """``knee`` over the ``judged`` range with its SLO judged (the module docstring);
    ``hides(top)``: the fitted curve may rise past the margin below ``top`` (exclusive)."""
    knee = knee.with_slo(slo_check(knee.value, readings))
    if not readings or not knee.resolved:
        return knee
    above = sorted({int(p.value) for p in history if _level(p) > judged[-1]})
    if above and not all(p.status == STATUS_OK and not p.preemptions
                         for p in history if _level(p) == above[0]):
        return knee   # a failure bounds the range: the memory ceiling's rule (cut_knee)
    top, edge = judged[-1], (above[0] if above else None)
    end = _shown_miss(readings, above, ceiling)
    if end <= top + 1 or not hides(end):
        return knee
    check = None if edge is None else slo_check(edge, readings)
    settle = _settle(top, end, above, readings, check)
    more = check.more_windows(toward_miss=True) if check is not None else len(settle)
    return knee.with_edge(_words(top, end, check), settle, more)


def _level(point: Point) -> float:
    """A numeric scan's level (``max_num_seqs``)."""
    return float(point.value)


def _shown_miss(readings: list[Reading], above: list[int], ceiling: int | None) -> int:
    """The first measured level above the range shown to miss the SLO, else one past the
    scan's ceiling: the exclusive top of the range that may be feasible."""
    for level in above:
        check = slo_check(level, readings)
        if check is not None and check.missed:
            return level
    return max([ceiling or 0] + above) + 1


def _settle(top: int, end: int, above: list[int], readings: list[Reading],
            check: SloCheck | None) -> tuple[int, ...]:
    """The levels whose windows settle the range: the bounding level again unless shown to
    miss, the first measured level above it not shown to miss, else the gap's midpoint."""
    levels = [] if check is None or check.missed else [check.value]
    unsettled = [level for level in above[1:] if level < end]
    if unsettled:
        levels.append(unsettled[0])
    else:
        low = check.value if check is not None and not check.missed else top
        middle = (low + min(end, 2 * top + 1)) // 2
        if low < middle < end and middle not in above:
            levels.append(middle)
    return tuple(levels)


def _words(top: int, end: int, check: SloCheck | None) -> str:
    """Why the range above ``top`` may hide the best."""
    if check is None:
        return (f"nothing above {top} was measured, and the range up to {end - 1} may hide "
                "the best")
    return check.edge_words(end)
