"""Repetitions of simulated tunes and their figures.

Per (surface, noise), over seeded repetitions (the recipe's ``tune.seed`` and the bench's
noise both the repetition's number): chosen / true best (p5 and median; 0 when no revision
was written), the share at or above 0.95 and 0.90 of the true best, launches (median and
max), budgeted trials, windows and simulated wall time (medians), how often the written
categorical value is the true best one, how often a revision was written, how often the
tune said "not resolved" (its confirmation: the written configuration's own launch below
its scan figure, or the pooled noise above the plateau threshold), how often a revision was
written **resolved** (written without that warning), and the **calibration**: among the
resolved, the share below 0.90 of the true best (the sweep table's definition,
``search/simulate/table.py``: the stated confidence holds when it is small).
``confidently_wrong`` (a share of all tunes) stays on the row for the depth of the misses;
``wrong_cases`` names those of the calibration one by one (seed, written configuration,
chosen / true best), for ``benchmarks/search_sim.py --tune`` to print.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from model_optimizer.search.simulate.bench import Noise
from model_optimizer.search.simulate.table import p5, pct
from model_optimizer.search.simulate.truth import Surface
from model_optimizer.search.simulate.tunedrive import TuneRun, run_tune

TUNE_HEADER = ["surface", "noise", "chosen/best p5", "median", ">= 0.95", ">= 0.90",
               "launches", "trials", "windows", "wall min", "best block_size", "written",
               "resolved", "resolved < 0.90"]


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
    confidently_wrong: float     # written, below 0.90, not warned: a share of all tunes
    resolved: float = 0.0        # share written without the warning
    calibration: float = 0.0     # among the resolved: share below 0.90 of the true best
    #: the resolved tunes below 0.90 of the true best, one by one: (seed, written, ratio)
    wrong_cases: tuple[tuple[int | None, dict | None, float], ...] = ()

    def cells(self) -> list[str]:
        """The markdown cells, in :data:`TUNE_HEADER` order."""
        return [self.surface, self.noise, f"{self.ratio_p5:.3f}", f"{self.ratio_median:.3f}",
                pct(self.at_least_95), pct(self.at_least_90),
                f"{self.launches:.0f} (max {self.max_launches})", f"{self.trials:.0f}",
                f"{self.windows:.0f}", f"{self.wall_min:.1f}", pct(self.knob_right),
                pct(self.written), pct(self.resolved), pct(self.calibration)]


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
    resolved = [r for w, r, run in zip(written, ratios, runs, strict=True)
                if w and not run.warned]
    return TuneRow(surface.name, noise, count, p5(ordered), statistics.median(ordered),
                   sum(r >= 0.95 for r in ratios) / count,
                   sum(r >= 0.90 for r in ratios) / count,
                   statistics.median(run.launches for run in runs),
                   max(run.launches for run in runs),
                   statistics.median(run.trials for run in runs),
                   statistics.median(run.windows for run in runs),
                   statistics.median(run.wall_s for run in runs) / 60.0,
                   sum(knob) / count, sum(written) / count,
                   sum(run.warned for run in runs) / count, sum(wrong) / count,
                   len(resolved) / count,
                   sum(r < 0.90 for r in resolved) / max(len(resolved), 1),
                   tuple((run.seed, run.chosen, r) for w, r, run in
                         zip(written, ratios, runs, strict=True)
                         if w and not run.warned and r < 0.90))
