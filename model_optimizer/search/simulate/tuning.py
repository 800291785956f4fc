"""The simulated engine a tune runs against: what ``search/tune/scan.py`` launches, pure.

:class:`SimEngine` stands in for the three places a scanning tune meets vLLM (the fields of
:class:`~model_optimizer.search.tune.host.ScanHost`): the scan server
(:meth:`SimEngine.scan_server`, ScanServer's signature: one launch at the ceiling, one steady-state
window per level), the confirming run of the chosen trial (:meth:`SimEngine.run_one`, run_recipe's
signature: a launch and one window), and the relaunch of the asked configuration when the scan
server does not start (:meth:`SimEngine.measure`). Each reads the
:class:`~model_optimizer.search.simulate.truth.Surface` through a
:class:`~model_optimizer.search.simulate.bench.Bench` server (its launch cost, offset, drift,
window noise and collapses, on the simulated clock) and answers with the
:class:`~model_optimizer.runner.RunOutcome` a real run would archive (qps with its interval, p99
TTFT, the SLO verdict), so the tune's own code turns it into trials.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from model_optimizer.archive import STATUS_OK
from model_optimizer.engine.classify import Failure
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.runner import RunOutcome
from model_optimizer.search.measure import Measurement
from model_optimizer.search.simulate.bench import Bench, Server
from model_optimizer.search.simulate.truth import Surface
from model_optimizer.search.tune.evaluate import TrialResult
from model_optimizer.search.tune.scan import window_result

REQUESTS = 100   # requests one simulated window completes (any positive count)
OOM = Failure("oom", "lower max_num_seqs", ["simulated: out of memory at launch"])


@dataclass
class SimEngine:
    """The surface served on the bench; ``slo_ms`` is the recipe's p99 TTFT bound."""

    surface: Surface
    bench: Bench
    slo_ms: float
    metric: str = "qps"
    runs: int = 0

    def scan_server(self, server: LoadedRecipe, steps_dir, ceiling: int, emit,
                    server_extra: dict) -> SimScanServer:
        """A scan server launched with ``server``'s knobs (ScanServer's signature)."""
        return SimScanServer(self, _choice(self.surface, server), ceiling)

    def run_one(self, step: LoadedRecipe, steps_dir, *, on_event=None,
                archive_extra: dict | None = None) -> RunOutcome:
        """The confirming run: a launch of ``step`` and one window at its max_num_seqs."""
        seqs = int(step.resolved["engine"]["max_num_seqs"])
        server = self.bench.launch(seqs)
        if not server.started:
            return self.failed_launch()
        return self.window(server, seqs, _choice(self.surface, step))

    def measure(self, step: LoadedRecipe, number: int, params: dict) -> TrialResult:
        """One trial on a launch of its own (the scan server did not start)."""
        outcome = self.run_one(step, None)
        if outcome.failure is not None:
            return TrialResult(Measurement("failed", failure_kind=OOM.kind, reason=OOM.hint,
                                           run_ids=[outcome.run_id]))
        return window_result(outcome, self.metric)

    def window(self, server: Server, seqs: int, choice) -> RunOutcome:
        """One steady-state window at ``seqs`` in flight on ``server``."""
        curve = self.surface.curve
        qps, ttft = server.read(self.surface.throughput(seqs, choice), curve.ttft_ratio(seqs))
        ttft_ms = ttft * self.slo_ms
        half = 1.96 * self.bench.noise.cv * qps
        metrics = {"requests": REQUESTS, "completed": REQUESTS, "failed": 0,
                   "success_rate": 1.0, "qps": qps, "goodput_qps": qps,
                   "ttft_p99_ms": ttft_ms, "slo_met": ttft_ms <= self.slo_ms,
                   "intervals": {"qps": {"value": qps, "half_width": half}}}
        return RunOutcome(STATUS_OK, Path("."), self.run_id(), metrics)

    def failed_launch(self) -> RunOutcome:
        """A launch that failed the way vLLM fails above the memory ceiling."""
        return RunOutcome("failed", Path("."), self.run_id(), failure=OOM)

    def run_id(self) -> str:
        """A new run's id."""
        self.runs += 1
        return f"sim-{self.runs}"


class SimScanServer:
    """ScanServer's interface on the bench: a context manager, ``started``, ``alive``,
    ``window(level, extra)``, ``outcome`` (the server's run) and ``ceiling``."""

    def __init__(self, engine: SimEngine, choice, ceiling: int) -> None:
        self.engine, self.choice, self.ceiling = engine, choice, ceiling
        self.server: Server | None = None
        self.outcome: RunOutcome | None = None

    def __enter__(self) -> SimScanServer:
        self.server = self.engine.bench.launch(self.ceiling)
        if self.server.started:
            self.outcome = RunOutcome(STATUS_OK, Path("."), self.engine.run_id())
        else:
            self.outcome = self.engine.failed_launch()
        return self

    def __exit__(self, *exc_info) -> bool:
        return False

    @property
    def started(self) -> bool:
        """True when the server is up."""
        return self.server is not None and self.server.started

    def alive(self) -> bool:
        """True while the server runs (a simulated server does not die)."""
        return self.started

    def window(self, level: int, extra: dict) -> RunOutcome:
        """One steady-state window at ``level`` in flight."""
        return self.engine.window(self.server, level, self.choice)


def _choice(surface: Surface, recipe: LoadedRecipe):
    """The categorical knob's value in ``recipe``."""
    return recipe.resolved["engine"][surface.knob]
