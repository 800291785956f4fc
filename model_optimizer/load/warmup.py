"""Warm-up until throughput is steady: measured, not a fixed count of requests.

A fresh vLLM CPU server runs its first minutes at a fraction of its later pace (measured
2026-12-04: 15.0 then 44.3 req/s a minute apart on one server), so a fixed warm-up of a few
requests leaves the ramp inside the measured window. After ``warmup_requests``, the warm-up
goes on in rounds of :data:`ROUND_S` seconds, counting the requests that finish in each; it
is **steady** when the last :data:`STEADY_ROUNDS` rounds' rates all lie within
:data:`STEADY_SPREAD` of their mean (no step and no ramp steeper than that across them), and
it gives up at ``warmup_steady_max_s`` (reported as not steady). The rounds, the time it
took and the verdict go into the run's figures (``warmup``).
"""

from __future__ import annotations

from typing import Any

ROUND_S = 3.0
STEADY_ROUNDS = 3
STEADY_SPREAD = 0.10


class SteadyWarmup:
    """Counts warm-up completions per round (perf seconds of the load's clock)."""

    def __init__(self, start: float, max_s: float) -> None:
        self.start, self.max_s = start, max_s
        self.finishes: list[float] = []
        self.verdict: str | None = None  # "steady" / "not steady" once decided
        self.decided_at: float | None = None

    def finished(self, now: float) -> None:
        """One warm-up request finished (ok) at ``now``."""
        self.finishes.append(now)

    def rates(self, now: float) -> list[float]:
        """Requests/s of each whole round so far."""
        rounds = int((now - self.start) // ROUND_S)
        counts = [0] * rounds
        for t in self.finishes:
            index = int((t - self.start) // ROUND_S)
            if index < rounds:
                counts[index] += 1
        return [count / ROUND_S for count in counts]

    def done(self, now: float) -> bool:
        """Whether to stop warming up now (steady, or out of time); decides once."""
        if self.verdict is not None:
            return True
        rates = self.rates(now)[-STEADY_ROUNDS:]
        if len(rates) == STEADY_ROUNDS and min(rates) > 0:
            mean = sum(rates) / len(rates)
            if all(abs(rate - mean) <= STEADY_SPREAD * mean for rate in rates):
                self.verdict, self.decided_at = "steady", now
                return True
        if now - self.start >= self.max_s:
            self.verdict, self.decided_at = "not steady", now
            return True
        return False

    def summary(self) -> dict[str, Any]:
        """What the figures record of the warm-up."""
        end = self.decided_at if self.decided_at is not None else self.start
        return {"verdict": self.verdict, "seconds": round(end - self.start, 2),
                "round_rates": [round(rate, 2) for rate in self.rates(end)],
                "rule": f"rounds of {ROUND_S:g} s; steady when the last {STEADY_ROUNDS} lie "
                        f"within {STEADY_SPREAD:.0%} of their mean"}
