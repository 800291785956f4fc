"""The pure search strategy of ``mopt sweep``: which value of one engine knob to measure next.

The loop that launches vLLM lives elsewhere; it calls :func:`next_value` with the sweep
config and the history of measured :class:`Point` s and measures whatever value the returned
:class:`Decision` names, until the decision's value is ``None``. Everything here is a
deterministic function of ``(config, history)``: no I/O, no processes, no clock. Replaying a
stored history therefore reproduces every decision, which is what makes ``--resume`` safe.

Numeric knobs are searched in two phases.

1. **Growth** from ``start``: ``v * growth`` (or ``v + step``), rounded to an integer or to
   ``multiple_of`` (floats to 6 decimals), bumped by one grid step when rounding stalls,
   capped at ``max`` (``max``, rounded down onto the grid, is tried once). The growth points
   are replayed in order and growth stops at the first one that shows (see :func:`growth_stop`):

   - ``memory``: failed with oom / kv_cache_too_small / planner, or skipped by the planner;
     ``failure``: failed for any other reason. Either way that value is a ceiling: nothing at
     or above the lowest failed or skipped value is ever proposed again.
   - ``slo``: ``slo_met`` is False; ``preemption``: ``preemptions > 0``.
   - against the best growth point so far, by intervals (:mod:`model_optimizer.search.sweep.decide`:
     each point's 95% half-width widened by the spread of its repeats): a *gain* must clear
     both ``t = plateau_threshold`` and the noise; a *regression* (stop ``regression``) needs
     disjoint intervals and a fall of more than ``t``; a *flat* step (stop ``plateau``) is one
     whose whole interval of gain stays under ``t``. Anything else is *undecided*: inside the
     noise, so growth goes on. Without intervals (one sample, no half-width) this reduces to
     comparing the numbers.
   - ``max``: the last growth point is the cap.

2. **Bisection**, recomputed from all measured points on every call. ``best`` is the largest
   median among acceptable points; a point is *good* when acceptable with a median of at
   least ``(1 - t) * best``. Brackets are tried in this order:

   - *ceiling bracket* (A, C): A the largest acceptable value, provided it is the best and
     still gaining (at least ``t`` over the acceptable value below it, or none below); C the
     smallest measured value above A (necessarily unacceptable). A good midpoint's outcome can
     raise ``best``, so this runs first.
   - *knee bracket* (L, K): K the smallest good value, L the largest measured value below K.

   A bracket is closed when ``high - low <= resolution`` or ``<= relative_resolution * high``
   (1/8 for max_num_seqs by default: never 120 against 121), when the rounded midpoint falls on
   an end or a measured value, or when it is at or above a failed/skipped value. When both are
   closed (or absent) the search ends with the growth stop rule.

Categorical knobs (``values``) are tried in order. The budget ``max_launches`` ends any phase.
:func:`choose` picks the knee, not the raw maximum; :func:`fallback_candidates` lists what to
try when the sustained confirmation run rejects the chosen value.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from model_optimizer.search.sweep.decide import PHASE_REMEASURE, compare, pooled  # noqa: F401
from model_optimizer.search.sweep.model import (  # noqa: F401 - the strategy's vocabulary, re-exported
    FLOAT_KNOBS,
    LOOP_KEYS,
    MEMORY_FAILURE_KINDS,
    PHASE_BISECT,
    PHASE_CATEGORICAL,
    PHASE_GROW,
    PHASES,
    STATUS_FAILED,
    STATUS_OK,
    STATUS_SKIPPED,
    STATUSES,
    STOP_RULES,
    Decision,
    Point,
    SweepConfig,
    SweepConfigError,
    grow_after,
    grow_sequence,
    round_value,
)

# --- formatting ---------------------------------------------------------------------------


def _fmt_value(value: Any) -> str:
    if isinstance(value, float) and not isinstance(value, bool):
        return f"{value:g}"
    return str(value)


def _fmt_metric(metric: float | None, unit: str = "req/s") -> str:
    if metric is None:
        return "no metric"
    text = f"{metric:.1f}" if abs(metric) >= 1 else f"{metric:.3g}"
    return f"{text} {unit}"


def _fmt_pct(fraction: float) -> str:
    return f"{fraction * 100:.0f}%" if fraction * 100 >= 1 else f"{fraction * 100:.2g}%"


def _describe(point: Point) -> str:
    """Short evidence for a point: its metric, or why it is not acceptable."""
    if point.status == STATUS_SKIPPED:
        return f"skipped by the planner ({point.failure_kind or 'planner'})"
    if point.status == STATUS_FAILED:
        return f"failed: {point.failure_kind or 'unknown'}"
    if point.slo_met is False:
        return f"SLO missed, {_fmt_metric(point.metric)}"
    if point.preemptions > 0:
        return f"{point.preemptions:g} preemptions, {_fmt_metric(point.metric)}"
    return _fmt_metric(point.metric)


# --- growth phase -------------------------------------------------------------------------


@dataclass
class _Growth:
    """Outcome of replaying the growth points: stopped (stop_rule) or the next value."""

    stop_rule: str | None
    reason: str
    next_value: float | None = None


def _unacceptable_rule(point: Point) -> str | None:
    """The stop rule a growth point triggers by itself (failure, SLO, preemption), if any."""
    if point.unfit:
        memory = point.status == STATUS_SKIPPED or point.failure_kind in MEMORY_FAILURE_KINDS
        return "memory" if memory else "failure"
    if point.slo_met is False:
        return "slo"
    if point.preemptions > 0:
        return "preemption"
    if point.metric is None:
        return "failure"
    return None


def _gain(previous: Point, current: Point) -> float:
    """Relative change of the median metric from ``previous`` to ``current``."""
    if previous.metric > 0:
        return (current.metric - previous.metric) / previous.metric
    return math.inf if current.metric > 0 else 0.0


def _classify_step(config: SweepConfig, best: Point, current: Point) -> str:
    """One growth step against the best point so far: ``gain``, ``regression``, ``flat``
    or ``undecided`` (:func:`model_optimizer.search.sweep.decide.compare`)."""
    return compare(config.plateau_threshold, best, current)


def _step_evidence(config: SweepConfig, previous: Point, current: Point) -> str:
    gain = _gain(previous, current)
    gain_text = "an infinite gain" if math.isinf(gain) else f"{gain * 100:+.1f}%"
    return (
        f"{config.param}={_fmt_value(current.value)} gave {_fmt_interval(current)}, "
        f"{gain_text} over {_fmt_interval(previous)} at {_fmt_value(previous.value)}"
    )


def _fmt_interval(point: Point) -> str:
    """``54.1 ± 2.3 req/s`` when the point has an interval, else its metric."""
    half = (point.spread[1] - point.spread[0]) / 2 if point.metric_samples else 0
    half = max(half, point.half_width or 0)
    return _fmt_metric(point.metric) if not half else \
        f"{point.metric:.1f} ± {half:.1f} req/s"


def _evaluate_growth(config: SweepConfig, grow_points: Sequence[Point]) -> _Growth:
    """Replay the growth points in order and return the first stop, or the next value."""
    threshold_text = _fmt_pct(config.plateau_threshold)
    reason = ""
    best: Point | None = None
    for point in grow_points:
        rule = _unacceptable_rule(point)
        if rule is not None:
            return _Growth(rule, f"growth stopped ({rule}) at {config.param}="
                                 f"{_fmt_value(point.value)}: {_describe(point)}")
        if best is None:
            best = point
            reason = f"{config.param}={_fmt_value(point.value)} gave {_fmt_interval(point)}"
            continue
        kind = _classify_step(config, best, point)
        evidence = _step_evidence(config, best, point)
        if kind == "regression":
            return _Growth("regression", f"growth stopped (regression): {evidence}, "
                                         f"a drop beyond {threshold_text} with disjoint "
                                         "intervals")
        if kind == "flat":
            return _Growth("plateau", f"growth stopped (plateau): {evidence}; the step "
                                      f"gained less than {threshold_text}, noise included")
        if kind == "undecided":
            reason = (f"{evidence}: inside the noise (the intervals cannot tell a gain of "
                      f"{threshold_text} from none), so one more step")
        else:
            noisy = point.half_width or best.half_width or point.relative_spread \
                or best.relative_spread
            reason = (f"{evidence} (threshold {threshold_text}"
                      f"{', outside the noise' if noisy else ''})")
        if point.metric > best.metric:
            best = point
    return _next_growth(config, grow_points, reason)


def _next_growth(config: SweepConfig, grow_points: Sequence[Point], reason: str) -> _Growth:
    """No stop so far: propose the next growth value, or stop at the cap."""
    if not grow_points:
        start = round_value(config, config.start)
        return _Growth(None, f"start the growth at {config.param}={_fmt_value(start)}", start)
    last = grow_points[-1].value
    following = grow_after(config, last)
    if following is None:
        return _Growth("max", f"growth stopped (max): {reason}; {_fmt_value(last)} is the "
                              f"largest value allowed (max {_fmt_value(config.max)})")
    return _Growth(None, f"grow to {_fmt_value(following)}: {reason}", following)


def growth_stop(config: SweepConfig, history: Sequence[Point]) -> tuple[str | None, str]:
    """Why growth stopped, from the history's growth points: (stop rule or None, sentence)."""
    grow_points = [point for point in history if point.phase == PHASE_GROW]
    outcome = _evaluate_growth(config, grow_points)
    return outcome.stop_rule, outcome.reason


# --- bisection phase ----------------------------------------------------------------------


def _latest_by_value(history: Iterable[Point]) -> dict[float, Point]:
    """Measured points keyed by value, sorted by value; every measurement of a value pooled
    (:func:`model_optimizer.search.sweep.decide.pooled`: its samples' median is compared)."""
    return {point.value: point for point in sorted(pooled(history), key=lambda p: p.value)}


def _best_metric(points: Iterable[Point]) -> float | None:
    metrics = [point.metric for point in points if point.acceptable]
    return max(metrics) if metrics else None


def _knee_threshold(config: SweepConfig, best: float) -> float:
    return (1 - config.plateau_threshold) * best


def _lowest_unfit(points: dict[float, Point]) -> float | None:
    """The lowest failed or skipped value: nothing at or above it is proposed."""
    unfit = [value for value, point in points.items() if point.unfit]
    return min(unfit) if unfit else None


def _midpoint(config: SweepConfig, low: float, high: float,
              points: dict[float, Point]) -> float | None:
    """The grid midpoint of (low, high), or None when the bracket is closed.

    Closed when ``high - low <= max(resolution, gap * high)`` (``gap``: the relative
    resolution, 1/8 for max_num_seqs by default, so never 120 against 121), when rounding
    lands on an end or a measured value, or when the midpoint is at or above a failed or
    skipped value.
    """
    if high - low <= max(config.resolution, config.gap * high) + 1e-12:
        return None
    middle = round_value(config, (low + high) / 2)
    ceiling = _lowest_unfit(points)
    if not low < middle < high or middle in points:
        return None
    if ceiling is not None and middle >= ceiling:
        return None
    return middle


@dataclass
class _Bracket:
    """A bracket to bisect: its ends, the proposed midpoint (None when closed), a sentence."""

    low: float
    high: float
    midpoint: float | None
    reason: str


def _still_gaining(config: SweepConfig, top: Point, acceptable: list[Point]) -> bool:
    """True when ``top`` gained at least the threshold over the acceptable value below it."""
    below = [point for point in acceptable if point.value < top.value]
    return not below or _gain(below[-1], top) >= config.plateau_threshold


def _ceiling_bracket(config: SweepConfig, points: dict[float, Point]) -> _Bracket | None:
    """Bracket (A, C): A the top acceptable value, the best and still gaining; C the first
    unacceptable value above it. None when there is no such bracket."""
    acceptable = [point for point in points.values() if point.acceptable]
    if not acceptable:
        return None
    top = acceptable[-1]
    if top.metric < _best_metric(acceptable) or not _still_gaining(config, top, acceptable):
        return None
    above = [point for point in points.values() if point.value > top.value]
    if not above:
        return None
    ceiling = above[0]
    middle = _midpoint(config, top.value, ceiling.value, points)
    reason = (f"bisect {_fmt_value(middle)} between {_fmt_value(top.value)} (acceptable, the "
              f"best so far: {_fmt_metric(top.metric)}) and {_fmt_value(ceiling.value)} "
              f"(ceiling: {_describe(ceiling)}) to find the largest acceptable value")
    return _Bracket(top.value, ceiling.value, middle, reason)


def _knee_bracket(config: SweepConfig, points: dict[float, Point]) -> _Bracket | None:
    """Bracket (L, K): K the smallest good value, L the largest measured value below it."""
    best = _best_metric(points.values())
    if best is None:
        return None
    knee = _knee_threshold(config, best)
    good = [p for p in points.values() if p.acceptable and p.metric >= knee]
    smallest_good = good[0]
    below = [point for point in points.values() if point.value < smallest_good.value]
    if not below:
        return None
    low = below[-1]
    middle = _midpoint(config, low.value, smallest_good.value, points)
    reason = (f"bisect {_fmt_value(middle)} between {_fmt_value(low.value)} "
              f"({_describe(low)}, below the knee threshold {_fmt_metric(knee)}) and "
              f"{_fmt_value(smallest_good.value)} (good: {_fmt_metric(smallest_good.metric)}, "
              f"within {_fmt_pct(config.plateau_threshold)} of the best {_fmt_metric(best)}) "
              f"to find the smallest good value")
    return _Bracket(low.value, smallest_good.value, middle, reason)


def _next_bisection(config: SweepConfig, history: Sequence[Point], growth: _Growth) -> Decision:
    """Ceiling bracket first (it may raise the best), then the knee bracket, then finish."""
    points = _latest_by_value(history)
    closed = []
    for bracket in (_ceiling_bracket(config, points), _knee_bracket(config, points)):
        if bracket is None:
            continue
        if bracket.midpoint is not None:
            return Decision(bracket.midpoint, PHASE_BISECT, bracket.reason)
        closed.append(f"{_fmt_value(bracket.low)}..{_fmt_value(bracket.high)}")
    brackets = f"; brackets closed: {', '.join(closed)}" if closed else "; nothing to bisect"
    return Decision(None, None, f"search finished: {growth.reason}{brackets}", growth.stop_rule)


# --- public entry points ------------------------------------------------------------------


def _next_categorical(config: SweepConfig, history: Sequence[Point]) -> Decision:
    measured = {_categorical_key(point.value) for point in history}
    for index, value in enumerate(config.values):
        if _categorical_key(value) not in measured:
            return Decision(value, PHASE_CATEGORICAL, f"try {config.param}={_fmt_value(value)} "
                                                      f"({index + 1} of {len(config.values)})")
    return Decision(None, None, f"all {len(config.values)} values of {config.param} measured",
                    "exhausted")


def _categorical_key(value: Any) -> tuple[str, Any]:
    """Distinguish True from 1 and False from 0 when matching values."""
    return type(value).__name__ if isinstance(value, bool) else "other", value


def _launches_used(history: Iterable[Point]) -> int:
    return sum(point.launches for point in history)


def next_value(config: SweepConfig, history: Sequence[Point]) -> Decision:
    """The next value to measure, given every point measured so far (a pure function).

    A finished search returns ``Decision(None, None, reason, stop_rule)``. When the search
    is not finished but ``max_launches`` launches have been spent, it finishes with
    stop_rule ``budget``. See the module docstring and :func:`_classify_step` for the rules.
    """
    decision = _natural_decision(config, history)
    used = _launches_used(history)
    if decision.value is not None and config.max_launches is not None \
            and used >= config.max_launches:
        return Decision(None, None, f"budget spent: {used} of {config.max_launches} launches "
                                    f"used; next would have been: {decision.reason}", "budget")
    return decision


def _natural_decision(config: SweepConfig, history: Sequence[Point]) -> Decision:
    """The decision ignoring the launch budget."""
    if config.categorical:
        return _next_categorical(config, history)
    growth = _evaluate_growth(config, [point for point in history if point.phase == PHASE_GROW])
    if growth.stop_rule is None:
        return Decision(growth.next_value, PHASE_GROW, growth.reason)
    return _next_bisection(config, history, growth)


def choose(config: SweepConfig, history: Sequence[Point], *,
           unit: str = "req/s") -> tuple[Point | None, str]:
    """The chosen point and a sentence with the figures, or (None, why) if none is acceptable.

    Numeric knobs: the smallest acceptable value whose median metric (every measurement of
    the value pooled, re-measurements included) is at least ``(1 - plateau_threshold) * best``
    (the knee, not the raw maximum). Categorical knobs:
    the best acceptable metric, ties going to the value listed first in ``values``.
    """
    order = _fallback_order(config, history)
    if not order:
        tried = ", ".join(f"{_fmt_value(p.value)} ({_describe(p)})" for p in history)
        return None, f"no acceptable value of {config.param}; tried: {tried or 'nothing'}"
    chosen = order[0]
    acceptable = [point for point in pooled(history) if point.acceptable]
    best_point = max(acceptable, key=lambda point: point.metric)
    head = f"{config.param}={_fmt_value(chosen.value)}: {_fmt_metric(chosen.metric, unit)}"
    if config.categorical or best_point.value == chosen.value:
        return chosen, f"{head}, the best acceptable value measured"
    return chosen, (f"{head}, within {_fmt_pct(config.plateau_threshold)} of the best "
                    f"{_fmt_metric(best_point.metric, unit)} at {_fmt_value(best_point.value)}")


def _fallback_order(config: SweepConfig, history: Sequence[Point]) -> list[Point]:
    """The chosen point followed by the points to try if it is rejected, in order."""
    if config.categorical:
        position = {_categorical_key(value): index for index, value in enumerate(config.values)}
        latest = {_categorical_key(point.value): point for point in pooled(history)}
        acceptable = [point for point in latest.values() if point.acceptable]
        return sorted(acceptable, key=lambda point: (
            -point.metric, position.get(_categorical_key(point.value), len(position))))
    points = _latest_by_value(history)
    best = _best_metric(points.values())
    if best is None:
        return []
    knee = _knee_threshold(config, best)
    acceptable = [point for point in points.values() if point.acceptable]
    chosen = next(point for point in acceptable if point.metric >= knee)
    lower = [point for point in acceptable if point.value < chosen.value]
    return [chosen, *reversed(lower)]


def fallback_candidates(config: SweepConfig, history: Sequence[Point],
                        rejected: set) -> list[Point]:
    """Points to try, in order, once the values in ``rejected`` failed the sustained run.

    Numeric knobs: the acceptable values below the chosen one, in decreasing order, keeping
    those below every rejected value (with ``rejected`` empty: the chosen point first).
    Categorical knobs: the remaining acceptable values, best metric first.
    """
    order = _fallback_order(config, history)
    if config.categorical:
        rejected_keys = {_categorical_key(value) for value in rejected}
        return [p for p in order if _categorical_key(p.value) not in rejected_keys]
    lowest_rejected = min(rejected) if rejected else math.inf
    return [point for point in order if point.value < lowest_rejected]
