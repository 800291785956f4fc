"""Repetitions of simulated searches, their figures, the markdown table and the goals.

Per (curve, noise, strategy), over seeded repetitions: chosen / true best (p5 and median),
how often the choice was **resolved** (validated, and the search's verdict says resolved),
the **calibration** (among resolved choices, the share below 0.90 of the true best: the
stated confidence must hold at any noise), the share of choices **near the knee** (true
throughput at least 0.98 of the true knee's and at most 1.25x the true knee: the restated
quality goal), the share at or above 0.90 of the true best, launches (median and max),
windows and simulated wall time (medians; wall p95 too). :func:`goals` judges the restated
goals of issue 35 for one strategy, each MET or MISSED with its figure.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from model_optimizer.simulate.bench import Noise
from model_optimizer.simulate.drive import THRESHOLD, Outcome, run_search
from model_optimizer.simulate.truth import Curve

#: the regimes at CV <= 5%, and the one at CV 30% with collapses (judged at 3x the budget)
QUIET = ("cv0", "cv2", "cv5")
LOUD = "cv30+collapse@3x"


@dataclass(frozen=True)
class Row:
    """The figures of one (curve, noise, strategy) cell."""

    curve: str
    noise: str
    strategy: str
    reps: int
    ratio_p5: float
    ratio_median: float
    resolved: float          # share validated and resolved
    calibration: float       # among resolved choices, share below 0.90 of the true best
    near_knee: float         # share >= 0.98 of the true knee's throughput and <= 1.25x knee
    at_least_90: float
    launches: float
    max_launches: int
    windows: float
    wall_min: float
    wall_p95_min: float
    wrong_depth: float = float("nan")   # the lowest chosen/best of a resolved miss

    def cells(self) -> list[str]:
        """The markdown cells, in :data:`HEADER` order."""
        return [self.curve, self.noise, self.strategy, f"{self.ratio_p5:.3f}",
                f"{self.ratio_median:.3f}", pct(self.resolved), pct(self.calibration),
                "-" if math.isnan(self.near_knee) else pct(self.near_knee),
                pct(self.at_least_90), f"{self.launches:.0f} (max {self.max_launches})",
                f"{self.windows:.0f}", f"{self.wall_min:.1f} ({self.wall_p95_min:.1f})"]


HEADER = ["curve", "noise", "strategy", "chosen/best p5", "median", "resolved",
          "resolved < 0.90", "near the knee", ">= 0.90", "launches", "windows",
          "wall min (p95)"]


def pct(share: float) -> str:
    return "-" if math.isnan(share) else f"{share * 100:.1f}%"


def p5(ordered: list[float]) -> float:
    """The 5th percentile of sorted values (the lower of the two nearest ranks)."""
    return ordered[int(0.05 * (len(ordered) - 1))]


def simulate(curve: Curve, noise: Noise, strategy: str, reps: int, *, seed0: int = 0,
             name: str | None = None, **options) -> Row:
    """``reps`` seeded searches of one cell, summarised (``name``: the cell's noise label)."""
    outcomes = [run_search(curve, noise, seed0 + rep, strategy, **options)
                for rep in range(reps)]
    return summarise(curve, name or noise.name, strategy, outcomes)


def near_knee(curve: Curve, chosen) -> bool:
    """The restated quality goal: true throughput at least 0.98 of the true knee's and the
    value at most 1.25x the true knee."""
    knee = curve.true_knee(THRESHOLD)
    return curve.ratio(chosen) >= 0.98 * curve.ratio(knee) and chosen <= 1.25 * knee


def summarise(curve: Curve, noise: str, strategy: str, outcomes: list[Outcome]) -> Row:
    """The row of one cell from its outcomes."""
    ratios = sorted(curve.ratio(o.chosen) if o.validated else 0.0 for o in outcomes)
    resolved = [o for o in outcomes if o.validated and not o.warned]
    wrong = [o for o in resolved if curve.ratio(o.chosen) < 0.90]
    near = float("nan") if curve.categorical else sum(
        o.validated and o.chosen is not None and near_knee(curve, o.chosen)
        for o in outcomes) / len(outcomes)
    walls = sorted(o.wall_s / 60.0 for o in outcomes)
    count = len(outcomes)
    return Row(curve.name, noise, strategy, count, p5(ratios), statistics.median(ratios),
               len(resolved) / count, len(wrong) / len(resolved) if resolved else 0.0,
               near, sum(r >= 0.90 for r in ratios) / count,
               statistics.median(o.launches for o in outcomes),
               max(o.launches for o in outcomes),
               statistics.median(o.windows for o in outcomes), statistics.median(walls),
               walls[min(count - 1, int(0.95 * count))],
               min((curve.ratio(o.chosen) for o in wrong), default=float("nan")))


def goals(rows: list[Row], strategy: str) -> list[tuple[str, bool, str]]:
    """The restated goals for ``strategy``: (goal, met, the figure that decides it)."""
    mine = [r for r in rows if r.strategy == strategy]
    quiet = [r for r in mine if r.noise in QUIET]
    numeric = [r for r in quiet if not math.isnan(r.near_knee)]
    loud = [r for r in mine if r.noise == LOUD]
    checks = [
        ("calibration: among resolved choices, <= 1% below 0.90 of the true best, every cell",
         mine, "calibration", True, lambda v: v <= 0.01),
        ("CV <= 5%: resolved in >= 95% within the default budget",
         quiet, "resolved", False, lambda v: v >= 0.95),
        ("CV <= 5%: >= 0.98 of the true knee's throughput and <= 1.25x the knee in >= 95%",
         numeric, "near_knee", False, lambda v: v >= 0.95),
        ("CV <= 5%: <= 3 launches (max_num_seqs)",
         numeric, "max_launches", True, lambda v: v <= 3),
        ("CV 30% + collapses: resolved in >= 50% within 3x the default budget",
         loud, "resolved", False, lambda v: v >= 0.50),
    ]
    out = []
    for name, cells, field, high, ok in checks:
        if not cells:
            out.append((name, False, "no cell run"))
            continue
        worst = (max if high else min)(cells, key=lambda r: getattr(r, field))
        value = getattr(worst, field)
        shown = f"{value}" if isinstance(value, int) else f"{value * 100:.1f}%"
        out.append((name, ok(value), f"worst cell {worst.curve} at {worst.noise}: {shown}"))
    return out


def favoured(rows: list[Row], candidates: list[str]) -> str:
    """The strategy the table favours: the most goals met, then the highest worst-cell
    share near the knee at CV <= 5%, then the highest worst-cell resolved share there."""
    def score(strategy: str) -> tuple:
        met = sum(ok for _, ok, _ in goals(rows, strategy))
        quiet = [r for r in rows if r.strategy == strategy and r.noise in QUIET]
        near = min((r.near_knee for r in quiet if not math.isnan(r.near_knee)), default=0.0)
        resolved = min((r.resolved for r in quiet), default=0.0)
        return met, near, resolved
    return max(candidates, key=score)


def markdown(rows: list, header: list[str] = HEADER) -> str:
    """The table of ``rows`` (anything with ``cells()`` in ``header`` order)."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row.cells()) + " |" for row in rows]
    return "\n".join(lines)
