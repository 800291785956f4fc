"""The margin a sweep's choice must show before it is called resolved (the rule itself,
the bound of one comparison, is the search core's: ``search/core/margin.py``; this module
decides which of the sweep's windows are the knee's and each rival's).

The knee ``K`` (the smallest acceptable value within the plateau threshold ``t`` of the
best) must be at least ``1 - 2t`` (0.90 at 5%: the share below which a choice counts as
wrong) of **every other** measured value ``V``, each at one-sided 95% confidence. Any of
them may be the true best: the top of a monotone curve measured once and read low, or a
neighbour of a best that read high; the choice must hold against each (so no correction for
the number of comparisons is due).

The bound against ``V`` is the better of two, each a one-sided 95% bound under its own
model of the noise (the simulator's calibration table measures what taking the better costs:
``benchmarks/search_sim.py``):

- **paired**, once K and V have two or more pairs of adjacent re-measured windows (A B A B
  on the same server or alternating launches): the lower bound of the ratio from the pairs'
  log-ratios (:class:`~model_optimizer.search.core.sequential.Paired`). A slow minute hits both
  windows of a pair, so drift cancels and the bound tightens with every pair taken, however
  noisy one window is. This is the bound the re-measurement keeps measuring for.
- **unpaired**: ``mean(K) / mean(V) - q * cv * sqrt(1/nK + 1/nV)`` with the
  search's pooled noise ``cv`` (:func:`~model_optimizer.search.sweep.pool.measured_noise`) and
  ``q`` Student's t at its degrees of freedom; wide when one window is noisy, so the
  re-measurement names V as the challenger to pair with.

The knee is read from its re-measured windows only, two or more (else the margin is not
shown): the window that made it the knee was selected for reading high, so it does not vouch
for itself. At a measured noise of zero every window counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from model_optimizer.search.core.margin import Margin, compare, margin_share
from model_optimizer.search.core.sequential import adjacent_pairs
from model_optimizer.search.sweep.pool import PHASE_REMEASURE, key_of, measured_noise, pooled


def margin_of(threshold: float, history: Sequence[Any], value: Any = None,
              noise: dict | None = None) -> Margin | None:
    """The knee ``value``'s margin (default: the pooled knee) against every other acceptable
    value; None when it cannot be judged (the noise unknown, nothing acceptable).
    ``noise``: the noise the choice rests on (default the search's :func:`measured_noise`)."""
    noise = noise or measured_noise(history)
    if noise is None:
        return None
    points = [p for p in pooled(history) if p.acceptable and isinstance(p.value, (int, float))]
    if not points:
        return None
    value = knee_value(threshold, history) if value is None else value
    share = margin_share(threshold)
    exact = noise["cv"] == 0
    named = 0 if exact else _named_at(threshold, history, value)
    own = _remeasured([p for i, p in enumerate(history) if i != named - 1], value, exact)
    if not any(key_of(p.value) == key_of(value) for p in points) \
            or len(own) < (1 if exact else 2):
        return Margin(value, share, None)
    series = [(key_of(p.value), p.metric) for p in history
              if p.phase == PHASE_REMEASURE and p.acceptable and p.metric_samples]
    skip = frozenset({_remeasure_index(history, named - 1)} - {None})
    comparisons = []
    for point in points:
        if key_of(point.value) == key_of(value):
            continue
        theirs = _remeasured(history, point.value, exact)
        theirs = theirs if len(theirs) >= 2 else _remeasured(history, point.value, True)
        pairs = () if exact else adjacent_pairs(series, key_of(value), key_of(point.value),
                                                skip)
        comparisons.append(compare(point.value, own, theirs, noise, pairs))
    return Margin(value, share, tuple(comparisons))


def margin_shortfall(threshold: float, history: Sequence[Any], value: Any = None,
                     noise: dict | None = None) -> float | None:
    """How far the choice's margin falls short of being shown (``inf``: the knee has fewer
    than two re-measured windows of its own), or None when it is shown or cannot be judged
    (the noise unknown: not resolved on its own account)."""
    margin = margin_of(threshold, history, value, noise)
    return None if margin is None else margin.shortfall


def _remeasure_index(history: Sequence[Any], index: int) -> int | None:
    """The position of ``history[index]`` among the re-measured windows (None: not one)."""
    if index < 0 or history[index].phase != PHASE_REMEASURE:
        return None
    return sum(1 for p in history[:index] if p.phase == PHASE_REMEASURE
               and p.acceptable and p.metric_samples)


def knee_value(threshold: float, history: Sequence[Any]) -> Any:
    """The pooled knee's value (None before any acceptable value)."""
    points = sorted((p for p in pooled(history)
                     if p.acceptable and isinstance(p.value, (int, float))),
                    key=lambda p: p.value)
    return knee_of(points, threshold).value if points else None


def knee_of(points: Sequence[Any], threshold: float) -> Any:
    """The knee of ``points`` (acceptable, sorted by value): the smallest within
    ``threshold`` of the best."""
    best = max(p.metric for p in points)
    return next(p for p in points if p.metric >= (1 - threshold) * best)


def _named_at(threshold: float, history: Sequence[Any], value: Any) -> int:
    """1 + the index of ``value``'s own window that last made it the pooled knee (0 when it is
    not the knee now, or another value's window made it the knee). That window was selected
    for reading high (a knee named by a re-measured window: the winner's curse), so it does
    not vouch for the choice."""
    if key_of(knee_value(threshold, history)) != key_of(value):
        return 0
    start = len(history)
    while start > 0 and key_of(knee_value(threshold, history[:start - 1])) == key_of(value):
        start -= 1
    return start if start and key_of(history[start - 1].value) == key_of(value) else 0


def _remeasured(history: Sequence[Any], value: Any, every: bool = False) -> list[float]:
    """The re-measured windows of ``value`` (acceptable ones; ``every``: all its windows)."""
    return [x for p in history if key_of(p.value) == key_of(value) and p.acceptable
            and (every or p.phase == PHASE_REMEASURE) for x in p.metric_samples]
