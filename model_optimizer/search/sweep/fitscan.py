"""The fitted-knee scan of ``max_num_seqs`` on one live server: which level next, and the knee.

A pure function of the windows measured so far (like ``search/sweep/strategy.py``), in three
phases, every window feeding one fit (:mod:`model_optimizer.search.core.fit`):

1. **up**: the coarse levels (powers of two with one midpoint: 1, 2, 3, 4, 6, 8, 12, ...)
   from ``start`` to the ceiling, stopping at the first level that is not acceptable (failed,
   SLO missed, preempted): that level bounds the range, and is bisected against the largest
   acceptable level until the two are within 1/8 of the ceiling;
2. **down**: the acceptable levels again, top to bottom, so a server that drifts over its
   life shows up as a time trend the fit removes instead of a slope in the knob (each
   level's two windows are as far from the pass's turn, up and down). When the time budget
   cannot hold every level (``steps_left``: the windows left by the budget's own check,
   ``search/sweep/budget.py``), the pass measures instead where the choice is decided
   (:func:`down_plan`): the top (the plateau the knee's share is of) and the two coarse
   levels nearest the knee fitted on the up pass, top to bottom, in turns until the budget
   ends; the three take turns, so a drift moves them alike (their mean times within one
   turn of each other) and leaves the knee's share as it was, and their repeats make the
   drift a time trend the fit sees;
3. **narrow**: while the knee's band is not resolved, the coarse levels inside the band (and
   the knee's neighbours) once more, interleaved, at most ``rounds`` times.

Where the recipe sets a latency SLO, the knee is resolved only when its value is shown to meet
it over every window near it, the ones that missed included
(:mod:`~model_optimizer.search.core.slocheck`): a level past the SLO's edge that read "met"
once widens the range, and the check keeps the knee chosen there from being called resolved.

The knee is then chosen on the fine grid (:func:`~model_optimizer.search.sweep.model.relative_grid`,
1/8 of the value) up to the largest acceptable level, with its band and verdict. When the
scan server's ceiling had to be lowered after a launch failed for memory,
:func:`cut_knee` decides whether the range the failure cut off could hide the best.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from model_optimizer.search.core.cutrange import cut_hides
from model_optimizer.search.core.fit import Knee, Window, fit_knee
from model_optimizer.search.core.slocheck import SloCheck
from model_optimizer.search.sweep.model import RELATIVE_RESOLUTION, Point, relative_grid
from model_optimizer.search.sweep.slojudge import judged_range, slo_judged, slo_readings

PHASE_UP, PHASE_CEILING = "scan-up", "ceiling"
PHASE_DOWN, PHASE_NARROW = "scan-down", "narrow"
#: narrowing rounds a live sweep allows (its budget usually ends them first)
NARROW_ROUNDS = 12


@dataclass(frozen=True)
class FitStep:
    """The next level to measure (``value`` None: finished, ``knee`` then holds the choice)."""

    value: int | None
    phase: str | None
    knee: Knee | None = None
    look: int = 0     # the verdict the windows so far, and this one, would be (look_alpha)


def coarse_levels(start: int, ceiling: int) -> list[int]:
    """Powers of two with one midpoint between, from ``start`` to ``ceiling`` inclusive."""
    levels, power = set(), 1
    while power <= ceiling:
        levels.update({power, power + power // 2} if power >= 2 else {1})
        power *= 2
    return sorted(v for v in levels | {ceiling} if start <= v <= ceiling)


def windows_of(history: Sequence[Point], window_minutes: float) -> list[Window]:
    """One fit window per acceptable measurement, timed by its order in the history."""
    return [Window(float(p.value), p.metric, index * window_minutes)
            for index, p in enumerate(history) if p.acceptable]


def _range(history: Sequence[Point], levels: list[int]) -> tuple[list[int], bool]:
    """The levels below the first unacceptable one (as measured so far, the ceiling's
    bisection included), and whether the up phase is finished."""
    up = [p for p in history if p.phase in (PHASE_UP, PHASE_CEILING)]
    bad = [p.value for p in up if not p.acceptable]
    if bad:
        good = sorted(p.value for p in up if p.acceptable and p.value < min(bad))
        return sorted({v for v in levels if v < min(bad)} | set(good)), True
    return levels, len(up) >= len(levels)


def _ceiling_step(history: Sequence[Point], usable: list[int]) -> int | None:
    """The midpoint between the largest acceptable level and the first unacceptable one,
    until they are within 1/8 of the ceiling (None: located, or no ceiling)."""
    bad = [p.value for p in history if p.phase in (PHASE_UP, PHASE_CEILING)
           and not p.acceptable]
    if not bad or not usable:
        return None
    low, high = usable[-1], min(bad)
    if high - low <= max(1, RELATIVE_RESOLUTION * high):
        return None
    middle = (low + high) // 2
    return middle if low < middle < high else None


def next_step(history: Sequence[Point], start: int, ceiling: int, threshold: float, *,
              rounds: int = 3, window_minutes: float = 1 / 3, seed: int = 0,
              steps_left: int | None = None) -> FitStep:
    """The next level, or the finished knee (see the module docstring); ``steps_left``: the
    windows the time budget still holds (None: no budget)."""
    levels = coarse_levels(start, ceiling)
    usable, up_done = _range(history, levels)
    if not up_done:
        return FitStep(levels[len([p for p in history if p.phase == PHASE_UP])], PHASE_UP)
    ceiling_probe = _ceiling_step(history, usable)
    if ceiling_probe is not None:
        return FitStep(ceiling_probe, PHASE_CEILING)
    down = len([p for p in history if p.phase == PHASE_DOWN])
    plan = _down_pass(history, usable, None if steps_left is None else steps_left + down,
                      threshold, window_minutes, seed)
    if down < len(plan):
        return FitStep(plan[down], PHASE_DOWN)
    position = len([p for p in history if p.phase in (PHASE_UP, PHASE_CEILING, PHASE_DOWN)])
    knee = knee_of(history[:position], usable, threshold, window_minutes, seed, ceiling)
    for look in range(1, rounds + 1):
        if knee is None or knee.resolved or knee.misfit:
            break   # (a wrong model is not narrowed: more windows do not fix it)
        levels = _band_levels(usable, knee)
        taken = history[position:position + len(levels)]
        if len(taken) < len(levels):
            return FitStep(levels[len(taken)], PHASE_NARROW, look=look)
        position += len(levels)
        knee = knee_of(history[:position], usable, threshold, window_minutes, seed, ceiling,
                       look)
    return FitStep(None, None, knee)


def down_plan(usable: list[int], knee: Knee | None, room: int | None) -> list[int]:
    """The down pass's levels in order: every acceptable level top to bottom when ``room``
    (the windows the budget holds for the pass; None: no budget) holds them all, or before
    there is a knee; else the top and the two levels nearest the knee fitted on the up pass,
    top to bottom, again and again, ``room`` windows (see the module docstring)."""
    if room is None or room >= len(usable) or knee is None or len(usable) < 2:
        return usable[::-1]
    return _turns(usable, knee, room)


def _turns(usable: list[int], knee: Knee, count: int) -> list[int]:
    """The short pass: the top and the two levels nearest ``knee``, in turns, ``count``."""
    nearest = sorted(usable[:-1], key=lambda v: (abs(math.log(v / knee.value)), -v))[:2]
    turn = sorted({*nearest, usable[-1]}, reverse=True)
    return [turn[step % len(turn)] for step in range(max(1, count))]


def _down_pass(history: Sequence[Point], usable: list[int], room: int | None,
               threshold: float, window_minutes: float, seed: int) -> list[int]:
    """:func:`down_plan` for a pass of ``room`` windows, the knee fitted on the up pass (only
    when the room cannot hold every level). A pass that began short stays short: the live
    budget's count is re-read each step, and steps shorter than its estimate can grow it
    past the level count mid-pass, which must not switch the order under way."""
    taken = [p.value for p in history if p.phase == PHASE_DOWN]
    began_short = taken != usable[::-1][:len(taken)]
    if not began_short and (room is None or room >= len(usable)):
        return usable[::-1]
    knee = knee_of([p for p in history if p.phase in (PHASE_UP, PHASE_CEILING)], usable,
                   threshold, window_minutes, seed)
    if knee is None or len(usable) < 2:
        return usable[::-1]
    return _turns(usable, knee, max(room or 0, len(taken) + 1) if began_short else room or 0)


def knee_so_far(history: Sequence[Point], start: int, ceiling: int, threshold: float, *,
                window_minutes: float = 1 / 3, seed: int = 0, look: int = 0) -> Knee | None:
    """The knee over every window measured so far (a scan its budget stopped mid-way;
    ``look``: the next step's, :attr:`FitStep.look`)."""
    return knee_of(history, _range(history, coarse_levels(start, ceiling))[0], threshold,
                   window_minutes, seed, ceiling, look)


def knee_of(history: Sequence[Point], usable: list[int], threshold: float,
            window_minutes: float, seed: int = 0, ceiling: int | None = None,
            look: int = 0) -> Knee | None:
    """The knee over the fine grid up to the largest acceptable level, judged on the SLO
    (``search/sweep/slojudge.py``; ``ceiling``: the scan's, the top of a range an SLO miss
    not shown may have cut off; ``look``: the verdicts taken before on fewer windows,
    ``sharetest.look_alpha``)."""
    if not usable:
        return None
    readings = slo_readings(history)
    judged = judged_range(history, usable, readings)
    windows = tuple(windows_of([p for p in history if p.value <= judged[-1]], window_minutes))
    knee = _cached_knee(windows, tuple(relative_grid(judged[0], judged[-1])), threshold, seed,
                        look)
    if knee is None:
        return None
    return slo_judged(knee, history, judged, ceiling, readings,
                      lambda top: _cut_hides(knee.value, windows, top, threshold, seed))


@functools.lru_cache(maxsize=64)
def _cut_hides(value: int, windows: tuple[Window, ...], top: int, threshold: float,
               seed: int) -> bool:
    """:func:`~model_optimizer.search.core.cutrange.cut_hides` up to ``top`` (exclusive),
    once per set of windows."""
    return cut_hides(value, windows, top, threshold, seed=seed)


@functools.lru_cache(maxsize=64)
def _cached_knee(windows: tuple[Window, ...], grid: tuple[int, ...], threshold: float,
                 seed: int, look: int = 0) -> Knee | None:
    """:func:`fit_knee`, once per set of windows (the next-step function is called after
    every window with the same earlier history)."""
    return fit_knee(windows, grid, threshold, seed=seed, look=look)


def _band_levels(usable: list[int], knee: Knee) -> list[int]:
    """The coarse levels inside the knee's band, with the knee's neighbours and the top."""
    low, high = min(knee.band[0], knee.value), max(knee.band[1], knee.value)
    below = [v for v in usable if v < low][-1:]
    above = [v for v in usable if v > high][:1]
    inside = [v for v in usable if low <= v <= high]
    return sorted(set(below + inside + above + usable[-1:] + list(knee.remeasure)))


def fitted_choice(knee: dict, history: Sequence[Point]) -> tuple[Point, str]:
    """The sweep's chosen point for a fitted knee (its windows if measured, else the fitted
    throughput) and the sentence with the verdict."""
    samples = [s for p in history if p.value == knee["value"] and p.acceptable
               for s in p.metric_samples] or [knee["fitted"]]
    verdict = Knee(**{**knee, "band": tuple(knee["band"])}).verdict()
    return Point(knee["value"], "fit", "ok", samples, slo_met=True), \
        f"max_num_seqs={knee['value']}: {verdict}"


def knee_record(knee: dict | None) -> dict | None:
    """What the written revision records of the knee: resolved, the band, the share."""
    if knee is None:
        return None
    return {"resolved": knee["resolved"], "value": knee["value"], "band": list(knee["band"]),
            "share_low": round(knee["share_low"], 4), "windows": knee["windows"],
            **({"slo_bound": SloCheck.from_dict(knee["slo"]).bound} if knee.get("slo") else {})}


def cut_knee(knee: Knee, windows: list[Window], failed: int | None, threshold: float, *,
             seed: int = 0) -> Knee:
    """``knee``, not resolved when its scan ceiling was lowered from ``failed`` and the range
    the failure cut off may hide a best that puts the knee below ``1 - RESOLVED * threshold``
    of it: judged on the knee's fitted throughput over the fitted best of ``knee .. failed -
    1``, in the point fit and at the one-sided :data:`CUT_PERCENTILE` percentile of
    :data:`CUT_BOOTSTRAP` bootstrap refits (:func:`~model_optimizer.search.core.fit.refits`).
    An extrapolation past the measured range is the least certain part of the curve: the
    point fit alone, flattened by noise, called knees at 0.89 of the true best resolved (the
    simulator's OOM ceiling at CV 10%), while its refits put them as low as 0.77-0.82. Its
    bootstrap distribution is heavy-tailed, so the lowest of the band's 40 refits (the band's
    own rule, where the distribution is near normal) is one draw of a tail it rarely reaches:
    the OOM ceiling at CV 30%, seed 192, read 0.929 as the lowest of 40, while 400 refits put
    their 5th percentile at 0.914 and their 1st at 0.859 (the truth: 0.78). The percentile of
    400 estimates that tail stably (``tests/unit/search/sweep/test_probe_ceiling.py``)."""
    if failed is None or not knee.resolved:
        return knee
    hidden = cut_hides(knee.value, windows, failed, threshold, seed=seed)
    return replace(knee, resolved=False, cut=True) if hidden else knee
