"""The sweep's time budget (``sweep.budget``, ``--budget``), checked before every step.

The budget is the sweep's wall time, its confirmation included. A step (a window on the
scan server, or a launch with its windows when relaunching) is started only when the time
left holds it and the confirmation that follows the search:

- the step counts at the **longest step measured so far** in this sweep (its warm-up
  included: every window on the scan server has its own, every launch its start), or at
  ``workload.duration_s`` before any is measured;
- the confirmation counts at ``sweep.confirm_duration_s`` plus a launch: the scan server's
  measured start, or the longest relaunched step less its windows (nothing before one is
  measured; no reserve at all when ``confirm_duration_s`` is 0).

So a sweep ends past its budget only by what its last step (or the confirmation's launch)
takes beyond the longest one measured before it, plus the seconds of closing the scan
server and writing the report; a confirmation that rejects its value adds a launch for
each fallback. The check is pure (:func:`budget_check`); ``search/sweep/steps.py`` feeds it the
session's clock.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from model_optimizer.search.sweep.model import Point

#: the stop rule a decision records when the budget ended the search
STOP_BUDGET = "budget"


@dataclass(frozen=True)
class BudgetCheck:
    """The next step against the budget: what is spent, what the step and the
    confirmation's reserve would take (seconds)."""

    budget_min: float
    elapsed_s: float
    step_s: float
    reserve_s: float

    @property
    def ends_at_s(self) -> float:
        """When the next step and the confirmation would end, on the sweep's clock."""
        return self.elapsed_s + self.step_s + self.reserve_s

    @property
    def fits(self) -> bool:
        """True when the budget holds the next step and the confirmation."""
        return self.ends_at_s <= self.budget_min * 60

    @property
    def steps_left(self) -> int | None:
        """How many more steps like the next one the time left holds before the
        confirmation's reserve, by the same rule as :attr:`fits` (0 exactly when it is
        False; None when the step's length is not known: 0 s)."""
        if not self.fits:
            return 0
        if self.step_s <= 0:
            return None
        room = self.budget_min * 60 - self.elapsed_s - self.reserve_s
        return max(1, math.floor(room / self.step_s))

    def words(self) -> str:
        """Why the budget stops the search here, for the decision and the report."""
        reserve = (f" and the confirmation (about {self.reserve_s:.0f} s)"
                   if self.reserve_s else "")
        return (f"time budget of {self.budget_min:g} min spent: {self.elapsed_s / 60:.1f} min "
                f"used, and the next step (about {self.step_s:.0f} s){reserve} would end at "
                f"{self.ends_at_s / 60:.1f} min")


def step_estimate_s(step_seconds: Sequence[float], window_s: float) -> float:
    """The next step's seconds: the longest measured so far, ``window_s`` before any."""
    return max(step_seconds, default=window_s)


def launch_estimate_s(history: Sequence[Point], step_seconds: Sequence[float],
                      window_s: float, server_start_s: float | None) -> float:
    """A launch's seconds, its windows aside: the scan server's measured start, else the
    longest relaunched step per launch less its window (0 before one is measured)."""
    if server_start_s is not None:
        return server_start_s
    per_launch = [seconds / point.launches - window_s
                  for point, seconds in zip(history, step_seconds, strict=False)
                  if point.launches]
    return max([0.0, *per_launch])


def budget_check(budget_min: float | None, elapsed_s: float, history: Sequence[Point],
                 step_seconds: Sequence[float], *, window_s: float, confirm_s: float,
                 server_start_s: float | None = None) -> BudgetCheck | None:
    """The next step against a budget of ``budget_min`` minutes (None: no budget)."""
    if not budget_min:
        return None
    reserve = confirm_s + launch_estimate_s(history, step_seconds, window_s,
                                            server_start_s) if confirm_s else 0.0
    return BudgetCheck(float(budget_min), elapsed_s, step_estimate_s(step_seconds, window_s),
                       reserve)
