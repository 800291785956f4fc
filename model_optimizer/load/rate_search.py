"""Capacity under an SLO: the highest Poisson arrival rate at which the SLOs still hold.

A pure strategy over measured windows (``next_rate(config, steps) -> rate | None``): start at
``start_rate``, multiply by ``growth`` while rates pass (the bracket), then bisect
(geometric midpoint) between the highest passing rate and the lowest failing one until the
failing rate is within ``resolution`` of the passing one. A first rate that fails is divided
by ``growth`` until one passes. ``max_windows`` bounds the number of windows.

A rate **passes** when the window met every SLO of the recipe (per-class ones included) and
its goodput reached ``min_goodput_fraction`` of the offered rate: an open-loop server that
falls behind completes fewer requests than arrive, and those that wait miss their TTFT bound.

Noise can make a rate pass above one that failed; the bracket is then the lowest failing rate
and the highest passing rate below it, and the result lists the contradicting passes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

MIN_RATE = 1e-3


@dataclass(frozen=True)
class RateSearchConfig:
    """The ``capacity`` section of a recipe, typed. No defaults here: the recipe schema
    holds them once (``RecipeSpec.capacity`` reads them), and ``mopt capacity`` builds this
    from that view."""

    start_rate: float
    growth: float
    max_rate: float | None
    resolution: float
    min_goodput_fraction: float
    window_s: float
    max_windows: int


@dataclass
class RateStep:
    """One measured window at one offered rate."""

    rate: float
    passed: bool
    reason: str
    figures: dict = field(default_factory=dict)


def judge(rate: float, metrics: Mapping[str, Any], fraction: float,
          window_s: float | None = None, sent: int | None = None) -> tuple[bool, str]:
    """Whether a window at ``rate`` passed, and why (in words).

    The offered load is what was actually sent (``sent`` measured requests over the
    ``window_s`` seconds of arrivals) when both are given: a short window's Poisson count
    varies around ``rate``, and a server is only to blame for what it was sent.
    """
    goodput = metrics.get("goodput_qps") or 0.0
    offered = rate
    problems = list(metrics.get("slo_violations") or [])
    if window_s and sent:
        offered = sent / window_s
        expected = rate * window_s  # a Poisson count: standard deviation sqrt(expected)
        if sent < expected - 4 * math.sqrt(expected):
            problems.append(f"only {offered:.2f} req/s could be sent of {rate:.2f} asked: the "
                            "client (or its CPU) is the limit, so this rate is not shown to pass")
    if goodput < fraction * offered:
        problems.append(f"goodput {goodput:.2f} req/s < {fraction:g} x {offered:.2f} offered")
    if problems:
        return False, "; ".join(problems)
    return True, f"goodput {goodput:.2f} req/s of {offered:.2f} offered, SLOs met"


def bracket(steps: Sequence[RateStep]) -> tuple[RateStep | None, RateStep | None]:
    """(highest passing step below the lowest failing one, lowest failing step)."""
    failing = min((s for s in steps if not s.passed), key=lambda s: s.rate, default=None)
    ceiling = failing.rate if failing is not None else math.inf
    passing = max((s for s in steps if s.passed and s.rate < ceiling),
                  key=lambda s: s.rate, default=None)
    return passing, failing


def next_rate(config: RateSearchConfig, steps: Sequence[RateStep]) -> float | None:
    """The next rate to measure, or None when the search is done."""
    if not steps:
        return config.start_rate
    if len(steps) >= config.max_windows:
        return None
    low, high = bracket(steps)
    if high is None:  # everything passed so far: grow
        assert low is not None
        if config.max_rate is not None and low.rate >= config.max_rate:
            return None
        grown = low.rate * config.growth
        return min(grown, config.max_rate) if config.max_rate is not None else grown
    if low is None:  # nothing passed yet: shrink
        shrunk = high.rate / config.growth
        return shrunk if shrunk >= MIN_RATE else None
    if high.rate <= low.rate * (1 + config.resolution):
        return None
    return math.sqrt(low.rate * high.rate)


def stop_reason(config: RateSearchConfig, steps: Sequence[RateStep]) -> str:
    """Why the search ended, in words (call once ``next_rate`` returned None)."""
    low, high = bracket(steps)
    if low is not None and high is not None and high.rate <= low.rate * (1 + config.resolution):
        return (f"bracketed: {low.rate:.3g} req/s passes, {high.rate:.3g} fails "
                f"(within {config.resolution:.0%})")
    if high is None and low is not None and config.max_rate is not None \
            and low.rate >= config.max_rate:
        return f"max_rate {config.max_rate:g} req/s passes: capacity is at least that"
    if low is None and high is not None and high.rate / config.growth < MIN_RATE:
        return "no rate passed down to the lowest rate tried"
    return f"budget: {len(steps)} windows (capacity.max_windows)"


def summary(config: RateSearchConfig, steps: Sequence[RateStep]) -> dict[str, Any]:
    """The search's result: capacity, its bracket, every window, contradictions."""
    low, high = bracket(steps)
    contradictions = [s.rate for s in steps if s.passed and high is not None
                      and s.rate >= high.rate]
    return {
        "capacity_rps": low.rate if low is not None else None,
        "first_failing_rps": high.rate if high is not None else None,
        "windows": len(steps),
        "stop_reason": stop_reason(config, steps),
        "passes_above_a_failure": contradictions,
        "steps": [{"rate": s.rate, "passed": s.passed, "reason": s.reason, **s.figures}
                  for s in steps],
    }
