"""The honest judge of a max_num_seqs choice: a repeated grid, its medians, and a verdict.

A grid file (JSON, written by ``sweep_vs_grid.py grid``) holds every launch of the grid:
``{"workload": ..., "recipe_sets": [...], "duration_s": ..., "measurements": [{"value",
"pass", "qps", "half_width", "slo_met", "preemptions", "ok", "load_avg", "at"}]}``. Passes
go up then down the values, so drift over the grid's life falls on both ends.

Per value: the median of its passes' req/s, the range of the passes (its interval: with two
passes, the two readings), and validity by the sweep's own rules (SLO met and no preemption,
in most passes). The grid's best is the largest valid median. A value the grid lacks is
judged by linear interpolation on log2(value) between its valid neighbours' medians (no
launch of its own); between a valid and an invalid neighbour it cannot be judged.

Verdicts (issue 20 item 5): ``MET`` (the choice's median >= 0.95 of the best median),
``NOT RESOLVED`` (the sweep itself said its choice is not resolved, or the grid cannot
judge the choice), ``MISS`` (below 0.95 and the sweep said nothing: a confident miss).

The grid is noisy too, and its best is the largest of noisy medians. Each verdict line also
gives the grid's own noise (:func:`grid_noise`: the pooled pass-to-pass CV) and whether the
shortfall from the best lies inside it (1.96 standard errors of the difference of two
medians, each of its passes). The verdict itself is the issue's, by medians; the noise says
how much a verdict on this grid can mean.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path

GOAL = 0.95


@dataclass(frozen=True)
class GridValue:
    """One grid value over its passes."""

    value: int
    median: float
    low: float
    high: float
    passes: int
    valid: bool


@dataclass(frozen=True)
class Verdict:
    """A choice judged against the grid."""

    verdict: str  # MET, NOT RESOLVED, MISS
    chosen: int | None
    chosen_median: float | None
    ratio: float | None
    best: GridValue
    how: str  # "grid", "interpolated", or why it could not be judged
    noise: float | None = None  # the grid's pooled pass-to-pass CV
    margin: float | None = None  # the shortfall the grid's noise can hide (relative)

    def line(self) -> str:
        """The verdict in one line."""
        if self.ratio is None:
            return (f"{self.verdict}: chose {self.chosen}; {self.how} "
                    f"(grid's best {self.best.median:.2f} at {self.best.value})")
        text = (f"{self.verdict}: chose {self.chosen}, {self.how} median "
                f"{self.chosen_median:.2f} req/s = {self.ratio:.1%} of the grid's best "
                f"median {self.best.median:.2f} [{self.best.low:.2f}, {self.best.high:.2f}] "
                f"at {self.best.value}")
        if self.noise is None or self.margin is None:
            return text
        inside = "inside" if 1 - self.ratio <= self.margin else "outside"
        return (f"{text}; grid noise CV {self.noise:.1%}: the shortfall "
                f"{1 - self.ratio:.1%} is {inside} it (+-{self.margin:.1%})")


def load_grid(path: Path) -> dict:
    """The grid file, or an empty grid when it does not exist yet."""
    if path.exists():
        return json.loads(path.read_text())
    return {"measurements": []}


def save_grid(path: Path, grid: dict) -> None:
    """Write the grid file (after every launch, so a piece interrupted loses nothing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(grid, indent=1) + "\n")


def summarize(grid: dict) -> dict[int, GridValue]:
    """Median, range and validity per value over the measured passes (failed launches
    count as invalid passes with no reading)."""
    by_value: dict[int, list[dict]] = {}
    for row in grid["measurements"]:
        by_value.setdefault(int(row["value"]), []).append(row)
    out = {}
    for value, rows in sorted(by_value.items()):
        readings = [r["qps"] for r in rows if r.get("ok") and r.get("qps") is not None]
        good = [r for r in rows if r.get("ok") and r.get("slo_met") is not False
                and not r.get("preemptions")]
        if not readings:
            continue
        out[value] = GridValue(value, statistics.median(readings), min(readings),
                               max(readings), len(rows), 2 * len(good) > len(rows))
    return out


def best_of(values: dict[int, GridValue]) -> GridValue | None:
    """The valid value with the largest median (the smallest such value on a tie)."""
    valid = [v for v in values.values() if v.valid]
    return max(valid, key=lambda v: (v.median, -v.value)) if valid else None


def interpolate(values: dict[int, GridValue], chosen: int) -> tuple[float | None, str]:
    """The grid's median at ``chosen`` (measured, or interpolated on log2 between valid
    neighbours), with how it was found or why it could not be."""
    if chosen in values:
        if not values[chosen].valid:
            return None, f"the grid finds {chosen} invalid (SLO or preemption)"
        return values[chosen].median, "grid"
    below = [v for v in values if v < chosen]
    above = [v for v in values if v > chosen]
    if not below or not above:
        return None, f"{chosen} lies outside the grid"
    low, high = values[max(below)], values[min(above)]
    if not (low.valid and high.valid):
        return None, (f"{chosen} lies between {low.value} and {high.value}, not both valid "
                      "on the grid")
    share = (math.log2(chosen) - math.log2(low.value)) / (
        math.log2(high.value) - math.log2(low.value))
    return low.median + share * (high.median - low.median), "interpolated"


def grid_noise(grid: dict) -> float | None:
    """The grid's pooled coefficient of variation between passes of the same value (None
    when no value has two readings)."""
    squares = dof = 0.0
    for value in {int(r["value"]) for r in grid["measurements"]}:
        readings = [r["qps"] for r in grid["measurements"] if int(r["value"]) == value
                    and r.get("ok") and r.get("qps") is not None]
        if len(readings) < 2 or statistics.fmean(readings) <= 0:
            continue
        squares += statistics.variance(readings) / statistics.fmean(readings) ** 2 * (
            len(readings) - 1)
        dof += len(readings) - 1
    return math.sqrt(squares / dof) if dof else None


def _margin(noise: float | None, chosen_passes: int, best_passes: int) -> float | None:
    """1.96 standard errors of the relative difference of two medians (as means)."""
    if noise is None or not chosen_passes or not best_passes:
        return None
    return 1.96 * noise * math.sqrt(1 / chosen_passes + 1 / best_passes)


def judge(grid: dict, chosen: int | None, sweep_unresolved: bool) -> Verdict | None:
    """The verdict on ``chosen``; None when the grid has no valid value at all."""
    values = summarize(grid)
    best = best_of(values)
    if best is None:
        return None
    if chosen is None:
        return Verdict("NOT RESOLVED" if sweep_unresolved else "MISS", None, None, None, best,
                       "the sweep chose nothing")
    median, how = interpolate(values, chosen)
    if median is None:
        return Verdict("NOT RESOLVED", chosen, None, None, best, how)
    ratio = median / best.median
    verdict = "MET" if ratio >= GOAL else "NOT RESOLVED" if sweep_unresolved else "MISS"
    passes = values[chosen].passes if chosen in values else min(
        values[max(v for v in values if v < chosen)].passes,
        values[min(v for v in values if v > chosen)].passes)
    noise = grid_noise(grid)
    return Verdict(verdict, chosen, median, ratio, best, how, noise,
                   _margin(noise, passes, best.passes))


def sweep_unresolved(summary: dict, plateau_threshold: float) -> bool:
    """Whether a sweep's summary says its choice is not resolved: its own ``resolved`` flag
    where the strategy writes one, else today's rule (measured noise CV above the plateau
    threshold, the report's "not resolved by these measurements")."""
    if "resolved" in summary:
        return not summary["resolved"]
    noise = summary.get("noise") or {}
    return bool(noise) and noise.get("cv", 0.0) > plateau_threshold


def grid_table(grid: dict) -> str:
    """The grid as Markdown: value, passes' readings in order, median, validity."""
    lines = ["| max_num_seqs | passes (req/s, in order) | median | valid |", "|---|---|---|---|"]
    for value, summary in summarize(grid).items():
        readings = ", ".join(f"{r['qps']:.1f}" if r.get("qps") is not None else "failed"
                             for r in grid["measurements"] if int(r["value"]) == value)
        lines.append(f"| {value} | {readings} | {summary.median:.1f} | "
                     f"{'yes' if summary.valid else 'no'} |")
    return "\n".join(lines)
