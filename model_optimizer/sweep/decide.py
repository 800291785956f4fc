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

Before the knee is chosen, the top candidates are **re-measured interleaved** (A B A B ...):
the knee candidate K (the smallest value within ``t`` of the best) and the best B, or, when
they coincide, the best and the acceptable value below it (above it, when the best is the
smallest value: a growth that stopped at its second value). A slow minute on a shared machine
then hits both, and every measurement of a value is pooled (median) before :func:`choose`
picks again; when the pooled windows then lead with a value that was never re-measured
(a re-measured best fell back), the new top two get a round of their own (at most
``remeasure_rounds`` such rounds). The pooled coefficient of variation of values measured
more than once is the **measured noise** the summary reports.

A choice is **resolved** (:func:`choice_resolved`, the summary's ``resolved``) when the
fitted knee says so, or, for the growth strategies, when the noise is known and within the
threshold (measured on repeated values, or, where none was repeated, on the chosen value's
windows and its sustained run: :func:`choice_noise`) and no lowered scan ceiling hides a
better value (:func:`cut_range_unresolved`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from functools import cache
from typing import Any

from model_optimizer.search.scanrules import Reading, noise_above, pooled_cv

PHASE_REMEASURE = "remeasure"


@cache
def _t95(dof: int) -> float:
    """Student's t one-sided 95% quantile; scipy.stats is imported on first use (0.9 s,
    most of every `mopt` command's start-up, tab completion included)."""
    from scipy.stats import t as student_t

    return float(student_t.ppf(0.95, dof))


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


def top_candidates(threshold: float, history: Sequence[Any], *,
                   with_remeasured: bool = False) -> list[Any]:
    """The values to re-measure before choosing: [knee, best], or [below best, best], or
    [best, above best] when the best is the smallest acceptable value (a growth stopped by a
    regression at its second value), as the search measured them (``with_remeasured``: as
    every window so far pools them)."""
    windows = history if with_remeasured else [h for h in history
                                                if h.phase != PHASE_REMEASURE]
    points = sorted((p for p in pooled(windows)
                     if p.acceptable and isinstance(p.value, (int, float))),
                    key=lambda p: p.value)
    if len(points) < 2:
        return []
    best = max(points, key=lambda p: p.metric)
    knee = _knee_of(points, threshold)
    if knee.value != best.value:
        return [knee.value, best.value]
    below = [p for p in points if p.value < best.value]
    if below:
        return [below[-1].value, best.value]
    above = [p for p in points if p.value > best.value]   # the best is the smallest value:
    return [best.value, above[0].value]                  # re-measure the step that fell


def remeasure_plan(threshold: float, history: Sequence[Any], rounds: int) -> list[Any]:
    """The re-measurements still to run, in interleaved order (A B A B ...).

    First ``rounds`` rounds of the top two candidates as the search measured them. When the
    pooled windows then name a knee or a best that was never re-measured (a re-measured
    value fell back and one measured once leads), one more round of the new top two, at most
    ``rounds`` such follow-ups: the choice rests on re-measured values where the budget
    allows. Then, while the knee's margin is not shown (:func:`margin_shortfall`), at most
    ``rounds`` more rounds of the pooled top two. Each round's pair is fixed by the history
    before its first window, so the plan is the same after ``--resume``.
    """
    rounds = max(rounds, 0)
    order = top_candidates(threshold, history) * rounds
    remeasured = [i for i, p in enumerate(history) if p.phase == PHASE_REMEASURE]
    if len(remeasured) < len(order) or not order:
        return order[len(remeasured):]
    later = remeasured[len(order):]
    start = remeasured[len(order) - 1] + 1
    for pair_of in [_unsettled_pair] * rounds + [_margin_pair] * rounds:
        pair = pair_of(threshold, history[:start])
        if not pair:          # the same history gives the same empty pair: next stage
            continue
        taken = [i for i in later if i >= start][:len(pair)]
        if len(taken) < len(pair):
            return pair[len(taken):]
        start = taken[-1] + 1
    return []


def _margin_pair(threshold: float, history: Sequence[Any]) -> list[Any]:
    """The knee and its strongest challenger while the knee's margin is not shown; else
    nothing (the pair whose next windows narrow the failing bound most)."""
    short, challenger = _weakest_margin(threshold, history)
    if short is None:
        return []
    if challenger is None:   # the knee lacks re-measured windows: the pooled top two
        return top_candidates(threshold, history, with_remeasured=True)
    return [_knee_value(threshold, history), challenger]


def margin_shortfall(threshold: float, history: Sequence[Any], value: Any = None,
                     noise: dict | None = None) -> float | None:
    """How far the choice's margin falls short of being shown, or None when it is shown or
    cannot be judged.

    The knee ``value`` (default: the pooled knee, the smallest acceptable value within
    ``threshold`` of the best) must be at least ``1 - 2 * threshold`` (0.90 at 5%: the share
    below which a choice counts as wrong) of **every other** measured value, each at
    one-sided 95% confidence: ``mean(K) / mean(V) - q * cv * sqrt(1/nK + 1/nV) >= 1 - 2t``,
    where ``q`` is Student's t quantile at the degrees of freedom of the noise ``cv``. Any of
    them may be the true best: the top of a monotone curve measured once and read low, or a
    neighbour of a best that read high; the choice must hold against each (so no correction
    for the number of comparisons is due). The knee is read from its re-measured windows
    only, two or more (else the margin is not shown: ``inf``): the window that made it the
    knee was selected for reading high, so it would vouch for itself. Another value is read
    from its re-measured windows when it has two, else from all of its windows, with the
    width so few windows earn. At a measured noise of zero every window counts. Returns the
    largest shortfall (> 0); None when the noise is unknown or above the threshold (not
    resolved on their own account). ``noise``: the noise the choice rests on
    (:func:`choice_noise`; default the search's :func:`measured_noise`).
    """
    return _weakest_margin(threshold, history, value, noise)[0]


def _weakest_margin(threshold: float, history: Sequence[Any], value: Any = None,
                    noise: dict | None = None) -> tuple[float | None, Any]:
    """(:func:`margin_shortfall`, the value whose bound falls shortest, or None)."""
    noise = noise or measured_noise(history)
    if noise is None or noise_above(noise, threshold):
        return None, None
    points = [p for p in pooled(history) if p.acceptable and isinstance(p.value, (int, float))]
    if not points:
        return None, None
    value = _knee_value(threshold, history) if value is None else value
    knee = next((p for p in points if _key(p.value) == _key(value)), None)
    if knee is None:
        return math.inf, None
    exact = noise["cv"] == 0
    named = 0 if exact else _named_at(threshold, history, value)
    own = _remeasured([p for i, p in enumerate(history) if i != named - 1], value, exact)
    if len(own) < (1 if exact else 2):
        return math.inf, None
    quantile = _t95(max(noise["windows"] - noise["values"], 1))
    worst: tuple[float, Any] = (-math.inf, None)
    for point in points:
        if point is knee:
            continue
        theirs = _remeasured(history, point.value, exact)
        theirs = theirs if len(theirs) >= 2 else _remeasured(history, point.value, True)
        spread = noise["cv"] * math.sqrt(1 / len(own) + 1 / len(theirs))
        bound = statistics.fmean(own) / statistics.fmean(theirs) - quantile * spread
        worst = max(worst, ((1 - 2 * threshold) - bound, point.value), key=lambda w: w[0])
    return (worst[0], worst[1]) if worst[0] > 0 else (None, None)


def _knee_value(threshold: float, history: Sequence[Any]) -> Any:
    """The pooled knee's value (None before any acceptable value)."""
    points = sorted((p for p in pooled(history)
                     if p.acceptable and isinstance(p.value, (int, float))),
                    key=lambda p: p.value)
    return _knee_of(points, threshold).value if points else None


def _knee_of(points: Sequence[Any], threshold: float) -> Any:
    """The knee of ``points`` (acceptable, sorted by value): the smallest within
    ``threshold`` of the best."""
    best = max(p.metric for p in points)
    return next(p for p in points if p.metric >= (1 - threshold) * best)


def _named_at(threshold: float, history: Sequence[Any], value: Any) -> int:
    """1 + the index of ``value``'s own window that last made it the pooled knee (0 when it is
    not the knee now, or another value's window made it the knee). That window was selected
    for reading high (a knee named by a re-measured window: the winner's curse), so it does
    not vouch for the choice."""
    if _key(_knee_value(threshold, history)) != _key(value):
        return 0
    start = len(history)
    while start > 0 and _key(_knee_value(threshold, history[:start - 1])) == _key(value):
        start -= 1
    return start if start and _key(history[start - 1].value) == _key(value) else 0


def _remeasured(history: Sequence[Any], value: Any, every: bool = False) -> list[float]:
    """The re-measured windows of ``value`` (acceptable ones; ``every``: all its windows)."""
    return [x for p in history if _key(p.value) == _key(value) and p.acceptable
            and (every or p.phase == PHASE_REMEASURE) for x in p.metric_samples]


def _unsettled_pair(threshold: float, history: Sequence[Any]) -> list[Any]:
    """The pooled top two, when one of them was never re-measured; else nothing."""
    pair = top_candidates(threshold, history, with_remeasured=True)
    again = {_key(p.value) for p in history if p.phase == PHASE_REMEASURE}
    return pair if any(_key(v) not in again for v in pair) else []


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


def choice_noise(history: Sequence[Any], confirmations: Sequence[dict] = (),
                 objective: str = "qps") -> dict | None:
    """The noise a choice rests on: :func:`measured_noise` of the search, or, when it measured
    no value twice (a relaunch sweep whose budget ran out first), the chosen value's windows
    with its sustained run's ``objective`` (the last passed confirmation's figures), flagged
    ``with_confirmation``; None when neither exists (the noise is unknown)."""
    noise = measured_noise(history)
    if noise is not None:
        return noise
    runs = [c for c in confirmations
            if c.get("ok") and (c.get("figures") or {}).get(objective) is not None]
    if not runs:
        return None
    chosen = next((p for p in pooled(history) if _key(p.value) == _key(runs[-1]["value"])),
                  None)
    if chosen is None:
        return None
    sustained = _copy(chosen)
    sustained.metric_samples = [float(runs[-1]["figures"][objective])]
    noise = measured_noise([chosen, sustained])
    return None if noise is None else {**noise, "with_confirmation": True}


def choice_resolved(config: Any, history: Sequence[Any], knee: dict | None,
                    failed: int | None, confirmations: Sequence[dict] = (),
                    objective: str = "qps") -> bool:
    """The sweep's own verdict on its choice (the summary's ``resolved``): the fitted knee's
    verdict, else a known noise (:func:`choice_noise`) within the threshold; never when a
    lowered scan ceiling may hide a better value or the sustained run of the written value
    fell short of what the search measured (:func:`shortfall`). Unknown noise is not a
    small one: a choice nothing was measured twice for is not resolved."""
    if any(c.get("ok") and c.get("shortfall") for c in confirmations):
        return False
    if knee is not None:
        return bool(knee["resolved"])
    noise = choice_noise(history, confirmations, objective)
    if noise is None or noise_above(noise, config.plateau_threshold):
        return False
    if margin_shortfall(config.plateau_threshold, history, written(confirmations),
                        noise) is not None:
        return False
    return not cut_range_unresolved(history, config.max, failed, config.plateau_threshold)


def written(confirmations: Sequence[dict]) -> Any:
    """The value the last passed confirmation wrote (None without one)."""
    return next((c["value"] for c in reversed(confirmations) if c.get("ok")), None)


def noise_note(config: Any, history: Sequence[Any], confirmations: Sequence[dict] = (),
               objective: str = "qps") -> str:
    """The choice's caveat when its noise (:func:`choice_noise`) is unknown or above the
    plateau threshold, or its margin is not shown (:func:`margin_shortfall`); else empty:
    what the terminal and the reason say."""
    noise = choice_noise(history, confirmations, objective)
    if noise is None:
        return ("; NOT RESOLVED: no value was measured twice and no sustained run read the "
                "chosen value, so the noise is unknown (raise `sweep.max_launches` or "
                "`sweep.remeasure_rounds`)")
    if noise_above(noise, config.plateau_threshold):
        return (f"; NOT RESOLVED: the repeated windows vary by {noise['cv']:.0%}, more than "
                f"the {config.plateau_threshold:.0%} plateau threshold (lengthen "
                "`workload.duration_s` or raise `sweep.remeasure_rounds`)")
    short = margin_shortfall(config.plateau_threshold, history, written(confirmations), noise)
    if short is None:
        return ""
    share = f"{1 - 2 * config.plateau_threshold:.0%}"
    if math.isinf(short):   # fewer than two windows of the choice beyond the one naming it
        return (f"; NOT RESOLVED: the windows do not show the choice at {share} or more of "
                "every other value: it was re-measured fewer than twice (raise "
                "`sweep.max_launches` or `sweep.remeasure_rounds`)")
    return (f"; NOT RESOLVED: at the measured noise ({noise['cv']:.1%}) the windows do not "
            f"show the choice at {share} or more of every other value (one-sided 95%; "
            f"{short:.1%} short): raise `sweep.remeasure_rounds` or lengthen "
            "`workload.duration_s`")


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
