"""Decisions by intervals: when a step gains, is flat or regresses, and what to re-measure.

A measured value is an interval, not a number: the 95% half-width of its steady-state window
(batch means, ``model_optimizer.load.steady``) widened by the spread of its repeated windows.
Comparing the current growth point ``C`` with the best growth point so far ``B`` (both
acceptable), with ``t`` the plateau threshold and ``h = sqrt(hB^2 + hC^2)`` the half-width
of their difference:

- **gain**: ``C - B >= t * B`` and ``C - B > h``: the rise is at least the threshold and
  outside the noise;
- **regression**: C's interval lies wholly below B's and ``C < (1 - t) * B``;
- **flat**: ``|C - B| + h < t * B``: the whole interval of the difference lies within the
  threshold, so the plateau is shown, not guessed (a reading below B whose interval reaches
  further down is a dip inside the noise, not a plateau);
- **undecided**: anything else. The noise hides whether the step gained; growth goes on (a
  step that merely *looks* flat or lower must not end the search: on a shared machine single
  windows swing by 20-60%), bounded by ``max``, the memory ceiling and the launch budget.

Before the choice is written it is **settled** (``sweep/settle.py``, the sequential rule of
``search/sequential.py``): the candidate measured side by side with its challengers, in
rounds, until the paired intervals show it at ``1 - 2 * t`` (0.90) or more of every other
value, or the budget is spent. A choice is **resolved** (:func:`choice_resolved`, the
summary's and the revision's ``resolved``) when the settling showed it, its sustained run held
up (:func:`shortfall`) and no lowered scan ceiling hides a better value
(:func:`cut_range_unresolved`); otherwise :func:`verdict_note` says what it rests on and
how many more windows (and minutes) the measured variance says would resolve it. The pooled
coefficient of variation of values measured more than once (:func:`measured_noise`) is
reported, but decides nothing: a noisy window is answered by more windows.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from model_optimizer.search.scanrules import Reading, pooled_cv

PHASE_REMEASURE = "remeasure"


def interval(point: Any) -> tuple[float, float] | None:
    """(low, high) of a point's metric: its half-width, widened by the spread of its samples."""
    samples = point.metric_samples
    if not samples:
        return None
    middle = statistics.median(samples)
    half = point.half_width or 0.0
    return min(middle - half, min(samples)), max(middle + half, max(samples))


def half_width(point: Any) -> float:
    """Half the width of :func:`interval` (0 without samples)."""
    bounds = interval(point)
    return 0.0 if bounds is None else (bounds[1] - bounds[0]) / 2


def compare(threshold: float, best: Any, current: Any) -> str:
    """``gain``, ``regression``, ``flat`` or ``undecided`` (see the module docstring)."""
    difference = current.metric - best.metric
    noise = math.hypot(half_width(best), half_width(current))
    if best.metric <= 0:
        return "gain" if current.metric > noise else "flat"
    if difference >= threshold * best.metric and difference > noise:
        return "gain"
    if interval(current)[1] < interval(best)[0] and difference < -threshold * best.metric:
        return "regression"
    if abs(difference) + noise < threshold * best.metric:
        return "flat"
    return "undecided"


def pooled(points: Iterable[Any]) -> list[Any]:
    """One point per value, every measurement pooled: samples joined (in order), the widest
    half-width, run ids and launches summed, status and flags from the latest measurement."""
    merged: dict[Any, Any] = {}
    for point in points:
        key = _key(point.value)
        if key not in merged:
            merged[key] = _copy(point)
            continue
        into = merged[key]
        into.metric_samples = into.metric_samples + list(point.metric_samples)
        into.half_width = max(into.half_width or 0.0, point.half_width or 0.0) or None
        into.run_ids = into.run_ids + list(point.run_ids)
        into.launches += point.launches
        into.status, into.failure_kind = point.status, point.failure_kind
        into.slo_met = None if into.slo_met is None and point.slo_met is None else (
            into.slo_met is not False and point.slo_met is not False)
        into.preemptions = max(into.preemptions, point.preemptions)
    return list(merged.values())


def _key(value: Any) -> tuple[str, Any]:
    return (type(value).__name__ if isinstance(value, bool) else "other", value)


def _copy(point: Any) -> Any:
    return type(point).from_dict(point.to_dict())


def measured_noise(history: Sequence[Any]) -> dict[str, Any] | None:
    """Pooled coefficient of variation of the values measured more than once, with the
    number of values and windows behind it; None when no value was measured twice
    (:func:`~model_optimizer.search.scanrules.pooled_cv` over the pooled values)."""
    return pooled_cv(p.metric_samples for p in pooled(history) if p.metric)


def cut_range_unresolved(points: Sequence[Any], ceiling: Any, failed: int | None,
                         threshold: float) -> bool:
    """True when a scan whose ceiling was lowered from ``failed`` (a server that did not start
    for memory) cannot rule out a better value above it: the lowered ``ceiling``'s pooled
    throughput is within ``threshold`` of the best acceptable one (the curve may still rise
    between ``ceiling`` and ``failed``)."""
    if failed is None:
        return False
    good = [p for p in pooled(points) if p.acceptable and p.metric is not None]
    top = next((p.metric for p in good if _key(p.value) == _key(ceiling)), None)
    return top is not None and top >= (1 - threshold) * max(p.metric for p in good)


def cut_range_note(config: Any, points: Sequence[Any], failed: int | None) -> str:
    """The choice's caveat when :func:`cut_range_unresolved` (else empty)."""
    if not cut_range_unresolved(points, config.max, failed, config.plateau_threshold):
        return ""
    return (f"; NOT RESOLVED: the scan ceiling was lowered from {failed} (failed to start for "
            f"memory) to {config.max:g}, whose throughput is within "
            f"{config.plateau_threshold:.0%} of the best: a better value may lie above it "
            f"(`mopt sweep --strategy relaunch --start {config.max:g} --max {failed - 1}` "
            "launches the values between)")


def verdict_note(settled: Any, threshold: float, window_minutes: float) -> str:
    """The choice's caveat when the settling (``sweep/settle.py``) did not resolve it (empty
    when it did): what it rests on, and what would resolve it, projected from the measured
    variance."""
    if settled is None or settled.value is None:
        return "; NOT RESOLVED: no candidate to settle"
    if settled.resolved:
        return ""
    weakest = settled.weakest()
    share = f"{1 - 2 * threshold:.0%}"
    if weakest is None or weakest.difference is None:
        rests = (f"the budget was spent before {settled.value} was measured against "
                 f"{'its strongest challenger' if weakest is None else weakest.value} "
                 "in enough rounds to know the noise")
    else:
        rests = (f"{settled.value} against {weakest.value} reads {weakest.difference} "
                 f"({weakest.kind}), not shown at {share} or more")
    more = settled.more(threshold, window_minutes)
    if more is None:
        hint = ("at this estimate no number of windows would show it: the choice may be "
                "wrong (sweep again on a quieter machine, or with longer windows)")
    else:
        hint = (f"about {more['windows']} more windows ({more['minutes']:g} more minutes, "
                "projected from the measured variance) would resolve it: raise `--budget`")
    return f"; NOT RESOLVED: {rests}; {hint}"


def choice_resolved(config: Any, history: Sequence[Any], settled: Any, failed: int | None,
                    confirmations: Sequence[dict] = ()) -> bool:
    """The sweep's verdict on its choice (the summary's and the revision's ``resolved``): the
    settling showed the written value at ``1 - 2 * threshold`` or more of every other value
    (paired intervals), the sustained run held up (:func:`shortfall`), and no lowered scan
    ceiling may hide a better value (:func:`cut_range_unresolved`)."""
    if any(c.get("ok") and c.get("shortfall") for c in confirmations):
        return False
    if settled is None or not settled.resolved:
        return False
    value = written(confirmations)
    if value is not None and _key(value) != _key(settled.value):
        return False     # a fallback was written: the settling vouched for another value
    return not cut_range_unresolved(history, config.max, failed, config.plateau_threshold)


def written(confirmations: Sequence[dict]) -> Any:
    """The value the last passed confirmation wrote (None without one)."""
    return next((c["value"] for c in reversed(confirmations) if c.get("ok")), None)


def shortfall(point: Any, figures: dict, objective: str) -> str:
    """Why the sustained run of ``point``'s value says its scan figure did not hold up (empty
    when it did): the run's 95% interval lies wholly below the point's pooled interval (the
    rule the tune's confirmation uses, ``search.scanrules.Reading.below``). A run without an
    interval, or a point that is not a measured window with one (a fitted knee's value), is
    no evidence either way."""
    value, half = figures.get(objective), figures.get(f"{objective}_half_width")
    bounds = interval(point)
    if value is None or half is None or bounds is None or point.half_width is None:
        return ""
    confirmed = Reading(float(value), float(half))
    scanned = Reading((bounds[0] + bounds[1]) / 2, (bounds[1] - bounds[0]) / 2)
    if not confirmed.below(scanned):
        return ""
    return (f"the sustained run read {confirmed}, wholly below the {bounds[0]:.4g}.."
            f"{bounds[1]:.4g} the search measured: the search's figure did not hold up")


def distinct(points: Sequence[Any]) -> list[Any]:
    """``points`` without a value seen before (the first of each value, in order)."""
    first: dict = {}
    for point in points:
        first.setdefault(_key(point.value), point)
    return list(first.values())


def quality_failures(figures: dict) -> str:
    """The values that failed the quality gate, as the reason names them (empty if none)."""
    return "; ".join(f"{value} failed the quality gate ({entry.get('reason')})"
                     for value, entry in figures.items() if entry.get("failure") == "quality")
