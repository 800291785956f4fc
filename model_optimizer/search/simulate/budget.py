"""The live sweep's time budget on the simulated clock.

The live strategies (``search/sweep/strategies/``) ask ``SweepSteps.budget_spent`` before every
window or launch; it calls the pure :func:`~model_optimizer.search.sweep.budget.budget_check` with
the session's clock (``SearchSession.elapsed``, ``time.monotonic``), the seconds every step
took, the scan server's measured start and ``sweep.confirm_duration_s``. The simulator does
not run the strategy classes (they write archives and reports); it drives the same pure
functions in the same order (``search/simulate/drive.py``, ``search/simulate/fitted.py``),
so this class feeds the same check the same inputs read off the bench's clock instead: the next step
counted at the longest measured so far, plus a reserve for the confirmation (its sustained
run and a launch). A simulated sweep therefore ends within its budget, as a live one does,
unless a confirmation falls back to a lower value (a launch and a run each).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from model_optimizer.search.simulate.bench import Bench
from model_optimizer.search.sweep.budget import BudgetCheck, budget_check
from model_optimizer.search.sweep.model import Point


class SimBudget:
    """The budget of one simulated sweep: the steps' seconds on the bench's clock."""

    def __init__(self, bench: Bench, budget_min: float | None, confirm_s: float) -> None:
        self.bench, self.budget_min, self.confirm_s = bench, budget_min, confirm_s
        self.step_seconds: list[float] = []
        #: the scan server's start, as the live probe records it (None when relaunching)
        self.server_start_s: float | None = None

    def launch_scan_server(self, ceiling):
        """Launch a scan server at ``ceiling``; a started one's seconds become the
        confirmation's launch estimate (the live ``state.server_start_s``)."""
        began = self.bench.clock
        server = self.bench.launch(ceiling)
        if server.started:
            self.server_start_s = self.bench.clock - began
        return server

    def take(self, measure: Callable[[object, str], Point], value, phase: str) -> Point:
        """Measure one step and record the simulated seconds it took."""
        began = self.bench.clock
        point = measure(value, phase)
        self.step_seconds.append(self.bench.clock - began)
        return point

    def check(self, history: Sequence[Point]) -> BudgetCheck | None:
        """The live check on the bench's clock (``workload.duration_s`` is the window;
        None without a budget)."""
        return budget_check(self.budget_min, self.bench.clock, history, self.step_seconds,
                            window_s=self.bench.noise.window_s, confirm_s=self.confirm_s,
                            server_start_s=self.server_start_s)

    def spent(self, history: Sequence[Point]) -> bool:
        """True when the time left cannot hold the next step and the confirmation (the
        live ``SweepSteps.budget_spent``)."""
        check = self.check(history)
        return check is not None and not check.fits

    def steps_left(self, history: Sequence[Point]) -> int | None:
        """The steps the time left still holds with the confirmation (the live
        ``SweepSteps.steps_left``; None without a budget)."""
        check = self.check(history)
        return None if check is None else check.steps_left
