"""The margin rule, defined once: is a chosen configuration shown to be at least ``1 - 2t``
of another measured one (``t`` the plateau threshold: 0.90 at 5%, the share below which a
choice counts as wrong), at one-sided 95% confidence?

The sweep judges its knee against every other measured value by it
(``search/sweep/margin.py``), the tune its written configuration against every other
combination of the knobs it does not scan (``search/tune/margin.py``); each strategy decides
which windows are the choice's and which are a rival's, and this module turns them into the
bound. The bound against one rival is the better of two, each a one-sided 95% bound under
its own model of the noise:

- **paired**, once there are two or more pairs of adjacent windows, one of each (A B A B on
  the same server or alternating launches): the lower bound of the ratio from the pairs'
  log-ratios (:class:`~model_optimizer.search.core.sequential.Paired`). A slow minute hits
  both windows of a pair, so drift cancels.
- **unpaired**: ``mean(own) / mean(theirs) - q * cv * sqrt(1/n_own + 1/n_theirs)`` with the
  search's pooled noise ``cv`` (:func:`~model_optimizer.search.core.scanrules.pooled_cv`:
  ``cv``, ``values``, ``windows``) and ``q`` Student's t at its degrees of freedom
  (``windows - values``).

Any rival may be the true best, so the choice must hold against each (no correction for the
number of comparisons is due). At a measured noise of zero the bound is the ratio itself.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from model_optimizer.search.core.sequential import Paired, t95


def margin_share(threshold: float) -> float:
    """The share of every rival the choice must be shown to reach: ``1 - 2t``."""
    return 1 - 2 * threshold


@dataclass(frozen=True)
class Comparison:
    """The choice against one rival ``value``: the one-sided 95% lower bound of choice /
    rival (the better of the unpaired and, with two or more pairs, the ``paired`` bound)."""

    value: Any
    bound: float
    paired: Paired | None = None

    def to_dict(self) -> dict:
        """JSON form for the decision record."""
        return {"against": self.value, "low": round(self.bound, 4),
                **({"paired": self.paired.to_dict()} if self.paired else {})}


@dataclass(frozen=True)
class Margin:
    """The choice's comparisons: ``knee`` the value judged, ``share`` the margin it must
    show (:func:`margin_share`); ``comparisons`` None when the choice lacks windows of its
    own to be judged by."""

    knee: Any
    share: float
    comparisons: tuple[Comparison, ...] | None

    @property
    def weakest(self) -> Comparison | None:
        """The comparison whose bound falls shortest (None without comparisons)."""
        return min(self.comparisons, key=lambda c: c.bound) if self.comparisons else None

    @property
    def shortfall(self) -> float | None:
        """How far the weakest bound falls short of ``share`` (inf: the choice lacks windows
        of its own), None when the margin is shown."""
        if self.comparisons is None:
            return math.inf
        weakest = self.weakest
        return None if weakest is None or weakest.bound >= self.share else \
            self.share - weakest.bound

    def short(self) -> tuple[Comparison, ...]:
        """The comparisons whose bound falls short of ``share``, weakest first."""
        return tuple(sorted((c for c in self.comparisons or () if c.bound < self.share),
                            key=lambda c: c.bound))


def compare(value: Any, own: Sequence[float], theirs: Sequence[float], noise: dict,
            pairs: Sequence[tuple[float, float]] = ()) -> Comparison:
    """The choice (``own`` windows) against the rival ``value`` (``theirs``), both
    non-empty, at the pooled ``noise``; ``pairs``: (own, theirs) readings taken side by
    side, used once there are two or more (never at a noise of zero)."""
    spread = noise["cv"] * math.sqrt(1 / len(own) + 1 / len(theirs))
    quantile = t95(noise["windows"] - noise["values"])
    bound = statistics.fmean(own) / statistics.fmean(theirs) - quantile * spread
    paired = None if noise["cv"] == 0 else Paired.of(pairs)
    return Comparison(value, max(bound, paired.bound()) if paired else bound, paired)
