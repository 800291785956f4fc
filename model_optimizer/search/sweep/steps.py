"""One sweep's steps: measure a value (relaunched, or a level on the live scan server),
record it (with the seconds it took) and the decision that asked for it, tell the display,
and check the time budget before the next one (``search/sweep/budget.py``). Every strategy
(``search/sweep/strategies/``) and the confirmation (``search/sweep/choice.py``) take their
steps here.
"""

from __future__ import annotations

from collections.abc import Callable

from model_optimizer.archive import utc_now
from model_optimizer.events import SweepSkipped, SweepStep, SweepStepDone, eta_s
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.search.core.knobs import describe, engine_values
from model_optimizer.search.core.session import SearchSession
from model_optimizer.search.measure import Measurement
from model_optimizer.search.sweep.budget import BudgetCheck, budget_check
from model_optimizer.search.sweep.probe import ProbeServer
from model_optimizer.search.sweep.state import SweepState, point_of

#: measures one value: (the recipe with the value applied, the value) -> its measurement
Measure = Callable[[LoadedRecipe, object], Measurement]


class SweepSteps:
    """The session, state and measurement one sweep's strategy works with."""

    def __init__(self, session: SearchSession, measure: Measure | None = None,
                 engine_factory=None):
        self.session, self.engine_factory = session, engine_factory
        #: a test's measure stands in for every launch (the scan server's too)
        self.injected = measure is not None
        #: the live scan server while a scanning strategy measures its levels on it
        self.probe: ProbeServer | None = None
        self.loaded = session.loaded
        self.state: SweepState = session.state  # type: ignore[assignment]
        self.emit = session.emit
        self.measure = measure or self._measure_for_real
        self.settings = self.loaded.spec.sweep

    def measure_step(self, value, phase: str) -> None:
        """Measure ``value``, append its point and figures to the state, save, tell."""
        started = self.session.elapsed()
        if self.probe is not None:  # a level on the live scan server
            self.session.sample_load()
            point, figures = self.probe.measure(value, phase)
        else:
            measured = self.measure(self.step_recipe(value), value)
            if measured.status == "skipped":
                self.emit(SweepSkipped(value, measured.reason))
            point, figures = point_of(value, phase, measured), measured.figures
        self.state.figures[str(point.value)] = figures
        self.state.step_figures.append(figures)
        self.state.history.append(point)
        self.state.step_seconds.append(round(self.session.elapsed() - started, 3))
        self.session.save()
        self.emit(SweepStepDone(point.value, point.status, point.metric, point.failure_kind,
                                point.half_width))

    def budget_spent(self) -> BudgetCheck | None:
        """The budget check when the time left cannot hold the next step and the
        confirmation (``search/sweep/budget.py``); None while it can, or without a budget."""
        check = self._budget_check()
        return None if check is None or check.fits else check

    def steps_left(self) -> int | None:
        """How many more steps the time left holds with the confirmation, by the same
        check (None without a budget)."""
        check = self._budget_check()
        return None if check is None else check.steps_left

    def _budget_check(self) -> BudgetCheck | None:
        """The budget check on the session's clock (None without a budget)."""
        state, workload = self.state, self.loaded.spec.workload
        return budget_check(state.budget, self.session.elapsed(), state.history,
                            state.step_seconds, window_s=float(workload.duration_s or 0),
                            confirm_s=float(self.settings.confirm_duration_s or 0),
                            server_start_s=state.server_start_s)

    def emit_step(self, value, phase: str | None, reason: str) -> None:
        """The ``step`` event; categorical values give the total and an ETA."""
        done = len(self.state.history)
        total = len(self.state.config.values) if self.state.config.categorical else None
        self.emit(SweepStep(done + 1, value, phase, reason, done, total,
                            eta_s(self.session.elapsed(), done, total)))

    def record_decision(self, value, phase, reason: str, stop_rule) -> None:
        """Keep why a value was asked for, or why the search stopped."""
        self.state.decisions.append({"value": value, "phase": phase, "reason": reason,
                                     "stop_rule": stop_rule, "at": utc_now()})

    def take(self, value, phase: str, reason: str, stop_rule=None) -> None:
        """One step: its decision, its event, its measurement."""
        self.record_decision(value, phase, reason, stop_rule)
        self.emit_step(value, phase, reason)
        self.measure_step(value, phase)

    def step_recipe(self, value) -> LoadedRecipe:
        """The recipe with the swept value applied (a tied concurrency follows max_num_seqs
        in the runner)."""
        setting = {self.state.config.param: value}
        return self.loaded.varied(engine_values(setting), f"sweep {describe(setting)}")

    def _measure_for_real(self, step: LoadedRecipe, value) -> Measurement:
        self.session.sample_load()  # here, not in measure_step: an injected measure is a test's
        return self.session.measure(step, repeats=self.settings.repeats,
                                    objective=self.state.objective, labels={"value": value})
