"""Settling a sweep's choice: the candidate measured side by side with its challengers until
the intervals of their differences show it, or the budget is spent (the sequential rule of
``search/sequential.py``).

After the search (growth and bisection, or probe-fit's scan up and down), the strategy names
its candidate ``K`` (the pooled knee, the fitted knee, the best categorical value). A choice is
wrong when it lies below ``1 - 2 * plateau_threshold`` (0.90) of the best, so ``K`` must be
shown at or above that share of **every other** acceptable value ``V`` (any of them may be the
true best: the top of a monotone curve read low, a neighbour of a best that read high), each at
one-sided :data:`~model_optimizer.search.sequential.CONFIDENCE`:

- a value measured with ``K`` in :data:`~model_optimizer.search.sequential.MIN_PAIRS` rounds or
  more is judged by the **paired** interval of ``K/V`` over those rounds;
- the best other value and the top of the measured range (where a saturating curve's best
  lies, and where a single collapsed reading would hide it), and every other value of a
  categorical knob, only so;
- any other value by the unpaired interval of ``K``'s round windows against all of its own
  windows, at the window noise the pairs measured
  (:func:`~model_optimizer.search.sequential.window_sd`): on a unimodal curve it lies between
  those two;
- before any pairs, the noise is unknown and only the strongest other value is a challenger.

Each **round** measures ``K`` and the (at most :data:`MAX_CHALLENGERS`) challengers whose
bounds fall shortest, in an order that alternates from round to round (``K V``, then ``V K``:
a linear drift falls on both), and rounds go on until no challenger is left (**resolved**) or
the caller's budget is spent (**not resolved**, with the windows and minutes the measured
variance says would resolve it). A candidate shown *below* the bound against some value is
replaced by the next acceptable value above it (numeric knobs) or by that value (categorical).

Everything here is a pure function of the history (the rounds are replayed from it), so a
resumed sweep settles exactly as an uninterrupted one would. The search's own windows of
``K`` never vouch for it: they are the windows that made it the candidate (the winner's curse).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from model_optimizer.search.sequential import (
    MIN_PAIRS,
    Difference,
    Drift,
    drift_of,
    log_ratios,
    projection,
    unpaired,
    window_sd,
    wrong_below,
)
from model_optimizer.sweep.decide import PHASE_REMEASURE, pooled
from model_optimizer.sweep.strategy import choose

#: challengers measured in one round beside the candidate (the weakest bounds first)
MAX_CHALLENGERS = 3
#: rounds at most, whatever the budget (windows that take no time, as a test's, end somewhere)
MAX_ROUNDS = 200
#: the strategy's candidate from a history
Candidate = Callable[[Sequence[Any]], Any]


def key(value: Any) -> tuple[str, Any]:
    """A value's identity (True is not 1)."""
    return (type(value).__name__ if isinstance(value, bool) else "other", value)


@dataclass(frozen=True)
class Standing:
    """The candidate against one other value: how it was judged and the answer."""

    value: Any
    kind: str                        # paired | unpaired | unknown
    difference: Difference | None    # candidate / value
    answer: str                      # above | below | open
    reading: float = 0.0             # the value's pooled reading

    @property
    def low(self) -> float:
        """The interval's lower end (-inf when unknown)."""
        return self.difference.low if self.difference else -math.inf

    def to_dict(self) -> dict:
        """JSON form."""
        return {"value": self.value, "kind": self.kind, "answer": self.answer,
                "reading": round(self.reading, 4),
                **(self.difference.to_dict() if self.difference else {})}


@dataclass
class Settled:
    """Where the settling stands: the candidate, its standings, the rounds, the verdict."""

    value: Any
    standings: list[Standing] = field(default_factory=list)
    rounds: int = 0
    windows: int = 0
    plan: list = field(default_factory=list)      # what the next round still measures
    noise: float | None = None                    # one window's sd (log units), from pairs
    drift: Drift | None = None

    @property
    def resolved(self) -> bool:
        """Every other value shown below the candidate's reach: nothing left to measure."""
        return self.value is not None and not self.plan and all(
            s.answer == "above" for s in self.standings)

    def open(self) -> list[Standing]:
        """The standings not yet shown, weakest first (among the unknown, the strongest
        reading first)."""
        return sorted((s for s in self.standings if s.answer != "above"),
                      key=lambda s: (s.low, -s.reading))

    def more(self, threshold: float, window_minutes: float) -> dict | None:
        """What would resolve it (None when resolved, or when the measured variance cannot
        say): more windows and minutes, projected from the pairs' variance."""
        left = self.open()
        if not left:
            return None
        bound, rounds = wrong_below(threshold), 0
        for standing in left:
            difference = standing.difference
            if difference is None or difference.ratio <= bound:
                return None
            needed = difference.pairs_needed(bound)
            if needed is None:
                return None
            rounds = max(rounds, needed - difference.pairs)
        return projection(max(rounds, 1), 1 + min(len(left), MAX_CHALLENGERS), window_minutes)

    def weakest(self) -> Standing | None:
        """The standing the verdict rests on: the open one with the lowest bound, else the
        shown one with the lowest bound."""
        pool = self.open() or sorted(self.standings, key=lambda s: s.low)
        return pool[0] if pool else None

    def to_dict(self, threshold: float, window_minutes: float) -> dict:
        """The record summary.json and the revision's ``validated.decision`` keep."""
        weakest = self.weakest()
        return {"value": self.value, "resolved": self.resolved, "bound": wrong_below(threshold),
                "against": weakest.to_dict() if weakest else None,
                "standings": [s.to_dict() for s in self.standings],
                "rounds": self.rounds, "windows": self.windows,
                "window_sd": None if self.noise is None else round(self.noise, 5),
                "more": self.more(threshold, window_minutes),
                "drift": self.drift.to_dict() if self.drift else None}


def settle(threshold: float, history: Sequence[Any], candidate: Candidate, *,
           categorical: bool = False, window_minutes: float = 1 / 3,
           memo: dict | None = None) -> Settled:
    """Replay the settling rounds of ``history`` and say what stands (see the module
    docstring); ``candidate(history)`` is the strategy's choice from a history.

    A round is planned from the history before its first window (search windows measured
    between rounds included: a reopened search), and its windows are the next settling
    windows. ``memo``: a dict the caller keeps between calls on one history that only grows
    (the loop's, the simulator's): the rounds already replayed are not replayed again. The
    answer is the same with or without it."""
    memo = {} if memo is None else memo
    memo.setdefault("rounds", [])
    memo.setdefault("taken", 0)
    rounds: list[dict] = memo["rounds"]
    settling = [i for i, p in enumerate(history) if p.phase == PHASE_REMEASURE]
    while True:
        taken = memo["taken"]
        cut = settling[taken] if taken < len(settling) else len(history)
        if memo.get("at") != (cut, len(rounds)):
            memo["at"], memo["state"] = (cut, len(rounds)), _standing(
                threshold, history[:cut], rounds, candidate, categorical)
        state: Settled = memo["state"]
        plan = _round(state, len(rounds))
        measured = [history[i] for i in settling[taken:taken + len(plan)]]
        if not plan or len(measured) < len(plan):
            return Settled(state.value, state.standings, len(rounds), len(settling),
                           plan[len(measured):], state.noise, _drift(history, window_minutes))
        rounds.append({key(p.value): p for p in measured})
        memo["taken"] = taken + len(plan)


def _round(state: Settled, index: int) -> list:
    """The next round's values in measuring order (empty: nothing left to measure)."""
    if state.value is None or index >= MAX_ROUNDS:
        return []
    left = state.open()
    if not left:
        return []
    if state.noise is None:     # the noise unknown: the strongest other value only
        left = [max(left, key=lambda s: s.reading)]
    order = [state.value] + [s.value for s in left[:MAX_CHALLENGERS]]
    return order if index % 2 == 0 else order[::-1]


def _standing(threshold: float, history: Sequence[Any], rounds: list[dict],
              candidate: Candidate, categorical: bool) -> Settled:
    """The candidate for the next round and its standings, from the history before it."""
    every = pooled(history)
    points = [p for p in every if p.acceptable and p.metric is not None]
    value = candidate(history)
    noise = window_sd(_ratio_groups(rounds))
    timed = _timed(history)
    windows: dict[tuple, list[float]] = {}
    for point in history:
        if id(point) in timed:
            windows.setdefault(key(point.value), []).append(timed[id(point)])
    for _ in range(len(points)):
        if value is None:
            return Settled(None)
        edges = _slo_edges(every, history, value)
        standings = _standings(threshold, points + edges, rounds, value, noise,
                               {key(p.value) for p in edges}, (timed, windows))
        beaten = _beaten_by(threshold, standings, points)
        if beaten is None:
            return Settled(value, standings, noise=noise[0] if noise else None)
        value = _replacement(points, value, beaten, categorical)
    return Settled(value, _standings(threshold, points, rounds, value, noise, set(),
                                     (timed, windows)),
                   noise=noise[0] if noise else None)


def _timed(history: Sequence[Any]) -> dict[int, float]:
    """Each acceptable window's reading by ``id`` of its point, corrected for the drift the
    history shows (referred to its first window), so that windows measured apart compare as
    if measured together."""
    drift = drift_of((key(p.value), float(i), p.metric) for i, p in enumerate(history)
                     if p.acceptable and p.metric)
    slope = math.log1p(drift.per_10min) / 10.0 \
        if drift is not None and math.isfinite(drift.low) else 0.0
    return {id(point): point.metric * math.exp(-slope * index)
            for index, point in enumerate(history) if point.acceptable and point.metric}


def _beaten_by(threshold: float, standings: list[Standing], points: Sequence[Any]) -> Any:
    """The value the candidate is shown below side by side: below ``1 - 2t`` of any value,
    or wholly below ``1 - t`` of the best other value (under the knee's threshold: the knee
    lies higher); None when there is none."""
    paired = [s for s in standings if s.kind == "paired" and s.difference is not None]
    below = [s for s in paired if s.answer == "below"]
    if below:
        return below[0].value
    best = max((p for p in points if any(key(p.value) == key(s.value) for s in paired)),
               key=lambda p: p.metric, default=None)
    under = [s for s in paired if best is not None and key(s.value) == key(best.value)
             and s.difference.high < 1 - threshold]
    return under[0].value if under else None


def _slo_edges(every: Sequence[Any], history: Sequence[Any], value: Any) -> list[Any]:
    """The values above the numeric candidate that missed an SLO in some window but otherwise
    ran well (their windows completed, nothing preempted): one window's SLO verdict near the
    edge is noisy, so each is measured side by side too, and stays a challenger unless most
    of its windows (at least :data:`MIN_PAIRS`) missed. Their pooled points, SLO met."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return []
    edges = []
    for point in every:
        if not isinstance(point.value, int | float) or isinstance(point.value, bool) \
                or point.value <= value or point.status != "ok" or point.metric is None \
                or point.preemptions or point.slo_met is not False:
            continue
        verdicts = [p.slo_met is not False for p in history
                    if key(p.value) == key(point.value) and p.metric is not None]
        if len(verdicts) >= MIN_PAIRS and 2 * sum(verdicts) <= len(verdicts):
            continue
        edge = type(point).from_dict(point.to_dict())
        edge.slo_met = True
        edges.append(edge)
    return edges


def _replacement(points: Sequence[Any], value: Any, beaten_by: Any, categorical: bool) -> Any:
    """The next candidate once ``value`` is shown below ``beaten_by``: the next acceptable
    value above it (numeric), else the value that beat it."""
    if categorical or not isinstance(value, int | float):
        return beaten_by
    above = sorted(p.value for p in points if p.value > value)
    return above[0] if above else beaten_by


def _standings(threshold: float, points: Sequence[Any], rounds: list[dict], value: Any,
               noise: tuple[float, int] | None, edges: set,
               timed: tuple[dict, dict]) -> list[Standing]:
    """The candidate ``value`` against every other acceptable value (and the SLO ``edges``,
    whose windows count whatever their SLO verdicts). Apart from the candidate, a value's
    readings are compared drift-corrected (``timed``) with the candidate's settling windows
    (the search's own windows of the candidate are the ones that made it the candidate)."""
    bound, mine = wrong_below(threshold), key(value)
    corrected, windows = timed
    own = [corrected[id(r[mine])] for r in rounds if mine in r and id(r[mine]) in corrected]
    side_by_side = _side_by_side_only(points, value) | edges | {
        k for r in rounds if mine in r for k in r if k != mine}   # once paired, always
    standings = []
    for point in points:
        if key(point.value) == mine:
            continue
        theirs = key(point.value)
        pairs = [(r[mine].metric, r[theirs].metric) for r in rounds
                 if mine in r and theirs in r and r[mine].acceptable
                 and (r[theirs].metric is not None if theirs in edges
                      else r[theirs].acceptable)]
        difference, kind = Difference.of(pairs), "paired"
        if difference is None and noise is not None and own \
                and key(point.value) not in side_by_side:
            difference, kind = unpaired(own, windows.get(theirs, []), *noise), "unpaired"
        if difference is None:
            standings.append(Standing(point.value, "unknown", None, "open", point.metric))
            continue
        answer = difference.answer(bound)
        if kind == "unpaired" and answer == "below":
            answer = "open"     # apart from the candidate: a reason to pair, not a verdict
        standings.append(Standing(point.value, kind, difference, answer, point.metric))
    return standings


def _side_by_side_only(points: Sequence[Any], value: Any) -> set:
    """The values the candidate is judged against side by side only (never from their own
    search windows, one of which may have collapsed): the best other value and the top of
    the measured range (where a saturating curve's best lies), or every other value of a
    categorical knob. On a unimodal curve the values between lie between these."""
    others = [p for p in points if key(p.value) != key(value)]
    if not others:
        return set()
    numeric = all(isinstance(p.value, int | float) and not isinstance(p.value, bool)
                  for p in others)
    if not numeric:
        return {key(p.value) for p in others}
    best = max(others, key=lambda p: p.metric)
    top = max(others, key=lambda p: p.value)
    return {key(best.value), key(top.value)}


def _ratio_groups(rounds: list[dict]) -> list[list[float]]:
    """The log-ratios of every two values measured in the same rounds, grouped by the two
    (each pair oriented the same way in every round, whatever the order measured)."""
    groups: dict[tuple, list[tuple[float, float]]] = {}
    for measured in rounds:
        points = sorted((p for p in measured.values() if p.acceptable),
                        key=lambda p: repr(key(p.value)))
        for index, first in enumerate(points):
            for other in points[index + 1:]:
                groups.setdefault((key(first.value), key(other.value)), []).append(
                    (first.metric, other.metric))
    return [log_ratios(pairs) for pairs in groups.values()]


def _drift(history: Sequence[Any], window_minutes: float) -> Drift | None:
    """The server's drift over the sweep: every value read at several times, by the order of
    its windows (``window_minutes`` apart)."""
    return drift_of((key(p.value), index * window_minutes, p.metric)
                    for index, p in enumerate(history) if p.acceptable and p.metric)


def settled_mean(history: Sequence[Any], value: Any) -> float | None:
    """The mean of the settling windows of ``value`` (None without one)."""
    readings = [p.metric for p in history if p.phase == PHASE_REMEASURE
                and key(p.value) == key(value) and p.acceptable]
    return statistics.fmean(readings) if readings else None


def candidate_for(config: Any, knee: dict | None) -> Candidate:
    """The strategy's candidate: the fitted knee's value (probe-fit), else the pooled choice
    of :func:`~model_optimizer.sweep.strategy.choose` (the knee, or the best categorical
    value)."""
    if knee is not None:
        return lambda history: knee["value"]

    def pooled_choice(history: Sequence[Any]) -> Any:
        chosen, _ = choose(config, history)
        return None if chosen is None else chosen.value
    return pooled_choice


def settled_of(config: Any, history: Sequence[Any], knee: dict | None,
               window_minutes: float, memo: dict | None = None) -> Settled:
    """:func:`settle` of a sweep with ``config`` (and its fitted ``knee``, if any)."""
    return settle(config.plateau_threshold, history, candidate_for(config, knee),
                  categorical=config.categorical, window_minutes=window_minutes, memo=memo)


def window_minutes(step_seconds: Sequence[float], fallback_s: float) -> float:
    """What one more window costs, in minutes: the median of the measured steps' durations
    (a relaunching sweep's include their launch), else ``fallback_s``."""
    timed = [s for s in step_seconds if s > 0]
    return (statistics.median(timed) if timed else fallback_s) / 60.0


#: what the confirmation's launch is assumed to cost before any launch was timed
LAUNCH_RESERVE_S = 60.0


def over_budget(elapsed_s: float, budget_minutes: float, confirm_s: float,
                window_s: float, launch_s: float | None = None) -> bool:
    """True when one more window (``window_s``) would leave too little of the budget for the
    sustained confirmation (``confirm_s`` and its launch, ``launch_s`` as timed, else
    :data:`LAUNCH_RESERVE_S`): the search and the settling stop."""
    launch = LAUNCH_RESERVE_S if launch_s is None else launch_s
    return elapsed_s + window_s + confirm_s + launch > budget_minutes * 60.0


def settled_choice(config: Any, history: Sequence[Any], knee: dict | None,
                   settled: Settled) -> tuple[Any, str]:
    """The strategy's choice (the fitted knee, else the pooled knee) and its sentence,
    replaced by the settled value when the settling showed the choice below another value."""
    from model_optimizer.sweep.fitscan import fitted_choice

    chosen, reason = fitted_choice(knee, history) if knee else choose(config, history)
    if chosen is None or settled.value is None or key(settled.value) == key(chosen.value):
        return chosen, reason
    point = next((p for p in pooled(history) if key(p.value) == key(settled.value)), None)
    if point is None:
        return chosen, reason
    return point, (f"{config.param}={settled.value}: {chosen.value} was shown below "
                   f"{1 - 2 * config.plateau_threshold:.0%} of another value side by side "
                   f"({reason})")
