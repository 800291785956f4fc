"""Decisions by intervals: when a step gains, is flat or regresses, what to re-measure next,
and when the choice is resolved.

A measured value is an interval, not a number: the 95% half-width of its steady-state window
(batch means, ``model_optimizer.load.steady``) widened by the spread of its repeated windows
(``search/sweep/pool.py``). Comparing the current growth point ``C`` with the best growth point so
far ``B`` (both acceptable), with ``t`` the plateau threshold and ``h = sqrt(hB^2 + hC^2)``
the half-width of their difference:

- **gain**: ``C - B >= t * B`` and ``C - B > h``: the rise is at least the threshold and
  outside the noise;
- **regression**: C's interval lies wholly below B's and ``C < (1 - t) * B``;
- **flat**: ``|C - B| + h < t * B``: the whole interval of the difference lies within the
  threshold, so the plateau is shown, not guessed;
- **undecided**: anything else. The noise hides whether the step gained; growth goes on,
  bounded by ``max``, the memory ceiling and the budget.

Before the knee is chosen, the search **measures sequentially** (:func:`remeasure_plan`):
two interleaved rounds (A B A B) of the top two candidates (the knee candidate K and the best
B, or, when they coincide, the best and its neighbour), then one pair of windows at a time,
the pooled top two while one of them was never re-measured, else K against the value whose
margin bound falls shortest (``search/sweep/margin.py``), until K is shown at ``1 - 2t`` or more of
every other value (paired, one-sided 95%) or ``sweep.budget`` is spent. The verdict rests
on the interval of the *difference*, which narrows with every pair however noisy a single
window is; "not resolved" means the budget ran out, and then the note projects how many
more pairs (and minutes) would have answered it (:func:`noise_note`).

A choice is **resolved** (:func:`choice_resolved`, the summary's ``resolved``) when the
fitted knee says so, or, for the growth strategies, when the margin is shown, the noise is
known (measured on repeated values, or on the chosen value's windows and its sustained run:
:func:`choice_noise`), no lowered scan ceiling hides a better value
(:func:`cut_range_unresolved`) and the sustained run held up (:func:`shortfall`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from model_optimizer.search.core.scanrules import Reading
from model_optimizer.search.sweep.margin import Margin, knee_of, margin_of, margin_shortfall
from model_optimizer.search.sweep.pool import (
    PHASE_REMEASURE,
    copy_point,
    half_width,
    interval,
    key_of,
    measured_noise,
    pooled,
)

__all__ = ["FIRST_ROUNDS", "PHASE_REMEASURE", "choice_noise", "choice_resolved", "compare",
           "cut_range_note", "cut_range_unresolved", "decision_record", "distinct",
           "interval", "margin_shortfall", "measured_noise", "noise_note", "noise_words",
           "pooled",
           "quality_failures", "remeasure_plan", "shortfall", "top_candidates", "written"]

#: interleaved rounds of the top two candidates before the sequential follow-ups
FIRST_ROUNDS = 2


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
    knee = knee_of(points, threshold)
    if knee.value != best.value:
        return [knee.value, best.value]
    below = [p for p in points if p.value < best.value]
    if below:
        return [below[-1].value, best.value]
    above = [p for p in points if p.value > best.value]   # the best is the smallest value:
    return [best.value, above[0].value]                  # re-measure the step that fell


def remeasure_plan(threshold: float, history: Sequence[Any],
                   rounds: int | None = None) -> list[Any]:
    """The re-measurements still to run, in interleaved order (A B A B ...).

    First :data:`FIRST_ROUNDS` rounds (``rounds`` when given) of the top two candidates as
    the search measured them. Then one round (a pair of adjacent windows) at a time: the
    pooled top two while one of them was never re-measured (:func:`_unsettled_pair`), else the
    knee and its weakest challenger while the margin is not shown (:func:`_margin_pair`).
    ``rounds`` None (the sweep): until the margin is shown, the caller's budget stops it;
    an integer: at most that many follow-ups of each kind (a bounded plan). Each round's pair
    is fixed by the history before its first window, so the plan is the same after
    ``--resume``.
    """
    first = FIRST_ROUNDS if rounds is None else max(rounds, 0)
    order = top_candidates(threshold, history) * first
    remeasured = [i for i, p in enumerate(history) if p.phase == PHASE_REMEASURE]
    if len(remeasured) < len(order) or not order:
        return order[len(remeasured):]
    later = remeasured[len(order):]
    start = remeasured[len(order) - 1] + 1
    stages = iter([_unsettled_pair] * rounds + [_margin_pair] * rounds) if rounds is not None \
        else None
    while True:
        if stages is None:
            pair = _unsettled_pair(threshold, history[:start]) or \
                _margin_pair(threshold, history[:start])
            if not pair:
                return []
        else:
            pair_of = next(stages, None)
            if pair_of is None:
                return []
            pair = pair_of(threshold, history[:start])
            if not pair:   # the same history gives the same empty pair: next stage
                continue
        taken = [i for i in later if i >= start][:len(pair)]
        if len(taken) < len(pair):
            return pair[len(taken):]
        start = taken[-1] + 1


def _margin_pair(threshold: float, history: Sequence[Any]) -> list[Any]:
    """The knee and its weakest challenger while the knee's margin is not shown; else
    nothing (the pair whose next windows narrow the failing bound most)."""
    margin = margin_of(threshold, history)
    if margin is None or margin.shortfall is None:
        return []
    if margin.weakest is None:   # the knee lacks re-measured windows: the pooled top two
        return top_candidates(threshold, history, with_remeasured=True)
    return [margin.knee, margin.weakest.value]


def _unsettled_pair(threshold: float, history: Sequence[Any]) -> list[Any]:
    """The pooled top two, when one of them was never re-measured; else nothing."""
    pair = top_candidates(threshold, history, with_remeasured=True)
    again = {key_of(p.value) for p in history if p.phase == PHASE_REMEASURE}
    return pair if any(key_of(v) not in again for v in pair) else []


def cut_range_unresolved(points: Sequence[Any], ceiling: Any, failed: int | None,
                         threshold: float) -> bool:
    """True when a scan whose ceiling was lowered from ``failed`` (a server that did not start
    for memory) cannot rule out a better value above it: the lowered ``ceiling``'s pooled
    throughput is within ``threshold`` of the best acceptable one (the curve may still rise
    between ``ceiling`` and ``failed``)."""
    if failed is None:
        return False
    good = [p for p in pooled(points) if p.acceptable and p.metric is not None]
    top = next((p.metric for p in good if key_of(p.value) == key_of(ceiling)), None)
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
    chosen = next((p for p in pooled(history) if key_of(p.value) == key_of(runs[-1]["value"])),
                  None)
    if chosen is None:
        return None
    sustained = copy_point(chosen)
    sustained.metric_samples = [float(runs[-1]["figures"][objective])]
    noise = measured_noise([chosen, sustained])
    return None if noise is None else {**noise, "with_confirmation": True}


def choice_resolved(config: Any, history: Sequence[Any], knee: dict | None,
                    failed: int | None, confirmations: Sequence[dict] = (),
                    objective: str = "qps") -> bool:
    """The sweep's own verdict on its choice (the summary's ``resolved``): the fitted knee's
    verdict, else a known noise (:func:`choice_noise`) and a shown margin
    (``search/sweep/margin.py``: paired where the windows allow); never when a lowered scan ceiling
    may hide a better value or the sustained run of the written value fell short of what the
    search measured (:func:`shortfall`). Unknown noise is not a small one: a choice nothing
    was measured twice for is not resolved."""
    if any(c.get("ok") and c.get("shortfall") for c in confirmations):
        return False
    if knee is not None:
        return bool(knee["resolved"])
    noise = choice_noise(history, confirmations, objective)
    if noise is None:
        return False
    if margin_shortfall(config.plateau_threshold, history, written(confirmations),
                        noise) is not None:
        return False
    return not cut_range_unresolved(history, config.max, failed, config.plateau_threshold)


def written(confirmations: Sequence[dict]) -> Any:
    """The value the last passed confirmation wrote (None without one)."""
    return next((c["value"] for c in reversed(confirmations) if c.get("ok")), None)


def noise_note(config: Any, history: Sequence[Any], confirmations: Sequence[dict] = (),
               objective: str = "qps", window_s: float | None = None) -> str:
    """The choice's caveat when its noise (:func:`choice_noise`) is unknown or its margin is
    not shown (``search/sweep/margin.py``), with what would resolve it; else empty: what the
    terminal and the reason say. ``window_s``: seconds a window took in this sweep (for the
    projection in minutes)."""
    noise = choice_noise(history, confirmations, objective)
    if noise is None:
        return ("; NOT RESOLVED: no value was measured twice and no sustained run read the "
                "chosen value, so the noise is unknown (raise `sweep.budget`, or "
                "`sweep.max_launches` for a relaunching sweep)")
    margin = margin_of(config.plateau_threshold, history, written(confirmations), noise)
    if margin is None or margin.shortfall is None:
        return ""
    share = f"{margin.share:.0%}"
    if margin.comparisons is None:   # fewer than two windows of the choice beyond its own
        return (f"; NOT RESOLVED: the windows do not show the choice at {share} or more of "
                "every other value: it was re-measured fewer than twice before the budget "
                f"ran out, and {noise_words(noise)} (raise `sweep.budget`, or "
                "`sweep.max_launches` for a relaunching sweep)")
    return f"; NOT RESOLVED within the budget: {margin_words(margin, noise, window_s)}"


def noise_words(noise: dict) -> str:
    """The measured noise with what it rests on: a spread from a repeat or two is a poor
    estimate of the noise (two windows that happen to agree read 0%), so the words never
    say "single windows vary by" on fewer than two degrees of freedom."""
    cv = f"{noise['cv']:.1%}"
    if noise.get("with_confirmation"):
        return (f"the chosen value's window and its sustained run differ by {cv}: too few "
                "to measure the noise")
    windows, values = noise["windows"], noise["values"]
    rests = f"{windows} windows of {values} value{'s' if values != 1 else ''}"
    if windows - values < 2:   # one degree of freedom
        return f"the only repeated windows, {rests}, differ by {cv}: too few to measure the noise"
    return f"single windows vary by {cv} over {rests} measured more than once"


def margin_words(margin: Margin, noise: dict, window_s: float | None = None) -> str:
    """The weakest comparison of an unshown margin in words, with what would show it."""
    weakest, share = margin.weakest, f"{margin.share:.0%}"
    if weakest.paired is None:
        return (f"at the measured noise ({noise['cv']:.1%} a window) the windows do not show "
                f"{margin.knee} at {share} or more of {weakest.value} (one-sided 95% bound "
                f"{weakest.bound:.2f}): the two were never re-measured side by side; raise "
                "`sweep.budget`")
    pairs = weakest.paired
    text = (f"after {pairs.n} interleaved pairs, {margin.knee} reads {pairs.ratio:.3f}x "
            f"{weakest.value} (one-sided 95% bound {weakest.bound:.3f}), short of the "
            f"{share} margin")
    needed = pairs.pairs_to_show(margin.share)
    if needed is None:
        return (f"{text}; the pairs put it below {share} of {weakest.value}, so more windows "
                "would not show this choice")
    windows = 2 * (needed - pairs.n)
    minutes = f", about {math.ceil(windows * window_s / 60)} min more" if window_s else ""
    return (f"{text}; about {needed - pairs.n} more pairs ({windows} windows{minutes}) at "
            "the spread measured would show it: raise `sweep.budget`")


def decision_record(config: Any, history: Sequence[Any], confirmations: Sequence[dict],
                    resolved: bool, objective: str = "qps") -> dict:
    """What the written revision records of its decision (``validated.decision``): the
    verdict, the rule, and the weakest comparison the margin rests on, with its interval."""
    noise = choice_noise(history, confirmations, objective)
    record: dict[str, Any] = {
        "resolved": bool(resolved),
        "rule": (f"the choice at {1 - 2 * config.plateau_threshold:.0%} or more of every "
                 "other value measured, one-sided 95%, paired interleaved windows where taken"),
        "windows": sum(len(p.metric_samples) for p in history),
        "noise_cv": None if noise is None else round(noise["cv"], 4)}
    margin = margin_of(config.plateau_threshold, history, written(confirmations), noise) \
        if noise is not None else None
    if margin is not None and margin.weakest is not None:
        record["weakest"] = margin.weakest.to_dict()
    return record


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
        first.setdefault(key_of(point.value), point)
    return list(first.values())


def quality_failures(figures: dict) -> str:
    """The values that failed the quality gate, as the reason names them (empty if none)."""
    return "; ".join(f"{value} failed the quality gate ({entry.get('reason')})"
                     for value, entry in figures.items() if entry.get("failure") == "quality")
