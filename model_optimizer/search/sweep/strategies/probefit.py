"""``probe-fit``: the probe-scan server scanned up and down (``search/sweep/fitscan.py``), the knee
from a curve fitted over every window, with its band and a resolved verdict; no
re-measurement. A window starts only while the time left holds it and the confirmation
(``search/sweep/budget.py``); when it cannot, the knee is fitted on the windows so far and its
verdict says the budget ended the scan. ``--strict`` refuses a knee that is not resolved."""

from __future__ import annotations

import statistics
from dataclasses import replace

from model_optimizer.archive import failed_status
from model_optimizer.events import KneeFitted
from model_optimizer.search.core.fit import Knee
from model_optimizer.search.sweep.budget import STOP_BUDGET, BudgetCheck
from model_optimizer.search.sweep.fitscan import (
    NARROW_ROUNDS,
    FitStep,
    cut_knee,
    knee_so_far,
    next_step,
    windows_of,
)
from model_optimizer.search.sweep.model import round_value
from model_optimizer.search.sweep.state import SweepOutcome
from model_optimizer.search.sweep.strategies import SweepStrategy
from model_optimizer.search.sweep.strategies.probescan import ProbeScan


@SweepStrategy.register("probe-fit")
class ProbeFit(ProbeScan):
    """The fitted knee on the live scan server."""

    def scan(self) -> None:
        """The fitted-knee scan until the knee is found, or until the time left cannot hold
        the next window (``search/sweep/budget.py``): then the knee over the windows so far."""
        state, steps = self.state, self.steps
        config, minutes = state.config, (steps.loaded.spec.workload.duration_s or 20) / 60
        rounds = steps.settings.remeasure_rounds
        low, high = int(round_value(config, config.start)), int(config.max)
        spent = None
        while (step := next_step(state.history, low, high, config.plateau_threshold,
                                 rounds=NARROW_ROUNDS if rounds is None else rounds + 1,
                                 window_minutes=minutes,
                                 steps_left=steps.steps_left())).value is not None:
            if (spent := steps.budget_spent()) is not None:
                break
            steps.take(step.value, step.phase,
                       f"{step.phase} level {step.value} (every window feeds the fitted curve)")
        self._fitted(step, spent, low, high, minutes)

    def _fitted(self, step: FitStep, spent: BudgetCheck | None, low: int, high: int,
                minutes: float) -> None:
        """Keep the knee (the finished scan's, or over the windows so far when the budget
        ended it) and the decision that says which."""
        state, threshold = self.state, self.state.config.plateau_threshold
        found = step.knee if spent is None else knee_so_far(
            state.history, low, high, threshold, window_minutes=minutes, look=step.look)
        knee = cut_knee(found, windows_of(state.history, minutes),
                        state.ceiling_failed, threshold) if found else None
        if knee is not None and spent is not None:
            knee = replace(knee, budget_spent=True)
        if knee is not None and state.step_seconds:
            knee = replace(knee, window_s=round(statistics.median(state.step_seconds), 1))
        state.knee = knee.to_dict() if knee else None
        verdict = knee.verdict() if knee else "too few acceptable windows to fit a curve"
        if spent is None:
            self.steps.record_decision(None, None, verdict, None)
            return
        self.steps.record_decision(None, None, f"{spent.words()}; next would have been "
                                   f"{step.phase} level {step.value}: {verdict}", STOP_BUDGET)

    def outcome(self) -> SweepOutcome:
        """The fitted knee, confirmed; ``--strict`` refuses a knee that is not resolved."""
        if self.state.knee is None:
            return super().outcome()
        knee = Knee(**{**self.state.knee, "band": tuple(self.state.knee["band"])})
        self.steps.emit(KneeFitted(knee.verdict(), knee.resolved))
        if not knee.resolved and self.state.strict:
            archive = self.steps.session.archive
            return SweepOutcome(failed_status("not_resolved"), archive.path, archive.id,
                                None, f"{knee.verdict()}; --strict: nothing written")
        return super().outcome()
