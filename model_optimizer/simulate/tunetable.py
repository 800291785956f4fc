"""Repetitions of simulated tunes and their figures.

Per (surface, noise), over seeded repetitions (the recipe's ``tune.seed`` and the bench's
noise both the repetition's number): chosen / true best (p5 and median; 0 when no revision
was written), the share at or above 0.95 and 0.90 of the true best, launches (median and
max), budgeted trials, windows and simulated wall time (medians), how often the written
categorical value is the true best one, how often a revision was written, how often the
tune said "not resolved" (its confirmation: the written configuration's own launch below
its scan figure), and how often it was **confidently wrong**: written, below 0.90 of the
true best, and not that warning.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from model_optimizer.simulate.bench import Noise
from model_optimizer.simulate.table import p5, pct
from model_optimizer.simulate.truth import Surface
from model_optimizer.simulate.tunedrive import TuneRun, run_tune

TUNE_HEADER = ["surface", "noise", "chosen/best p5", "median", ">= 0.95", ">= 0.90",
               "launches", "trials", "windows", "wall min", "best block_size", "written",
               "not resolved", "resolved < 0.90", "grid launches"]


@dataclass(frozen=True)
class TuneRow:
    """The figures of one (surface, noise) cell."""

    surface: str
    noise: str
    reps: int
    ratio_p5: float
    ratio_median: float
    at_least_95: float
    at_least_90: float
    launches: float
    max_launches: int
    trials: float
    windows: float
    wall_min: float
    knob_right: float        # share written with the true best categorical value
    written: float
    warned: float            # share the tune said "not resolved"
    confidently_wrong: float

    grid_launches: int = 0   # a grid over the space: one launch per combination

    @property
    def calibration(self) -> float:
        """Among resolved (written, not warned) tunes, the share below 0.90 of the best."""
        resolved = self.written - self.warned
        return self.confidently_wrong / resolved if resolved > 0 else 0.0

    def cells(self) -> list[str]:
        """The markdown cells, in :data:`TUNE_HEADER` order."""
        return [self.surface, self.noise, f"{self.ratio_p5:.3f}", f"{self.ratio_median:.3f}",
                pct(self.at_least_95), pct(self.at_least_90),
                f"{self.launches:.0f} (max {self.max_launches})", f"{self.trials:.0f}",
                f"{self.windows:.0f}", f"{self.wall_min:.1f}", pct(self.knob_right),
                pct(self.written), pct(self.warned), pct(self.calibration),
                str(self.grid_launches)]


def grid_launches(surface: Surface) -> int:
    """A grid over the tune's space: every power of two of max_num_seqs in its range times
    every value of the categorical knob, one launch each."""
    curve, levels, level = surface.curve, 0, 1
    while level <= curve.high:
        levels += level >= curve.low
        level *= 2
    return levels * len(surface.effects)


def tune_goals(rows: list[TuneRow]) -> list[tuple[str, bool, str]]:
    """The tune's restated goals: at CV 5%, >= 0.95 of the true best in >= 95% with at most
    half the grid's launches; calibrated as the sweep (<= 1% of resolved below 0.90)."""
    at5 = [r for r in rows if r.noise == "cv5"]
    if not at5:
        return [("tune at CV 5%", False, "no cell run")]
    share = min(at5, key=lambda r: r.at_least_95)
    launches = max(at5, key=lambda r: r.launches / r.grid_launches)
    wrong = max(rows, key=lambda r: r.calibration)
    return [
        ("tune, CV 5%: >= 0.95 of the true best in >= 95%", share.at_least_95 >= 0.95,
         f"worst cell {share.surface}: {share.at_least_95 * 100:.1f}%"),
        ("tune, CV 5%: at most half the grid's launches (median)",
         all(r.launches <= r.grid_launches / 2 for r in at5),
         f"worst cell {launches.surface}: {launches.launches:.0f} of {launches.grid_launches}"),
        ("tune: among resolved choices, <= 1% below 0.90 of the true best, every cell",
         wrong.calibration <= 0.01,
         f"worst cell {wrong.surface} at {wrong.noise}: {wrong.calibration * 100:.1f}%"),
    ]


def simulate_tune(surface: Surface, noise: Noise, reps: int, *, seed0: int = 0,
                  **options) -> TuneRow:
    """``reps`` seeded tunes of one cell, summarised."""
    runs = [run_tune(surface, noise, seed0 + rep, **options) for rep in range(reps)]
    return summarise_tune(surface, noise.name, runs)


def summarise_tune(surface: Surface, noise: str, runs: list[TuneRun]) -> TuneRow:
    """The row of one cell from its runs."""
    best, _ = surface.best()
    ratios = [surface.ratio(run.chosen) for run in runs]
    written = [run.chosen is not None for run in runs]
    knob = [run.chosen is not None and run.chosen[surface.knob] == best[surface.knob]
            for run in runs]
    wrong = [w and r < 0.90 and not run.warned
             for w, r, run in zip(written, ratios, runs, strict=True)]
    count, ordered = len(runs), sorted(ratios)
    return TuneRow(surface.name, noise, count, p5(ordered), statistics.median(ordered),
                   sum(r >= 0.95 for r in ratios) / count,
                   sum(r >= 0.90 for r in ratios) / count,
                   statistics.median(run.launches for run in runs),
                   max(run.launches for run in runs),
                   statistics.median(run.trials for run in runs),
                   statistics.median(run.windows for run in runs),
                   statistics.median(run.wall_s for run in runs) / 60.0,
                   sum(knob) / count, sum(written) / count,
                   sum(w and run.warned for w, run in zip(written, runs, strict=True)) / count,
                   sum(wrong) / count, grid_launches(surface))
