"""``probe-fit``: the probe-scan server scanned up and down (``sweep/fitscan.py``), the knee
from a curve fitted over every window, with its band and a resolved verdict; no
re-measurement. ``--strict`` refuses a knee that is not resolved."""

from __future__ import annotations

from model_optimizer.archive import failed_status
from model_optimizer.events import KneeFitted
from model_optimizer.sweep.fit import Knee
from model_optimizer.sweep.fitscan import (
    NARROW_ROUNDS,
    cut_knee,
    knee_so_far,
    next_step,
    windows_of,
)
from model_optimizer.sweep.model import round_value
from model_optimizer.sweep.state import SweepOutcome
from model_optimizer.sweep.strategies import SweepStrategy
from model_optimizer.sweep.strategies.probescan import ProbeScan


@SweepStrategy.register("probe-fit")
class ProbeFit(ProbeScan):
    """The fitted knee on the live scan server."""

    def scan(self) -> None:
        """The fitted-knee scan until the knee is found (or the budget is spent)."""
        state, steps = self.state, self.steps
        config, minutes = state.config, (steps.loaded.spec.workload.duration_s or 20) / 60
        rounds = steps.settings.remeasure_rounds
        low, high = int(round_value(config, config.start)), int(config.max)
        while (step := next_step(state.history, low, high, config.plateau_threshold,
                                 rounds=NARROW_ROUNDS if rounds is None else rounds + 1,
                                 window_minutes=minutes)).value is not None:
            if steps.session.out_of_time(state.budget):
                break
            steps.take(step.value, step.phase,
                       f"{step.phase} level {step.value} (every window feeds the fitted curve)")
        found = step.knee if step.value is None else knee_so_far(
            state.history, low, high, config.plateau_threshold,
            window_minutes=minutes)   # the budget stopped it
        knee = cut_knee(found, windows_of(state.history, minutes),
                        state.ceiling_failed, config.plateau_threshold) if found else None
        state.knee = knee.to_dict() if knee else None
        steps.record_decision(None, None, knee.verdict() if knee else
                              "too few acceptable windows to fit a curve", None)

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
