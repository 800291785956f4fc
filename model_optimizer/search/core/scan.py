"""One server, many batch sizes: the scan that sweep's probe-scan and tune's scanning
trials share (``docs/design.md`` section 2, "Scanning max_num_seqs").

A server launched with ``max_num_seqs = M`` that serves ``c <= M`` requests in flight
batches at most ``c`` sequences, as a server launched with ``max_num_seqs = c`` would: the
same KV pool and chunked-prefill budget, only fewer sequences to schedule. So a search
launches once at the ceiling ``M`` and measures each level ``c`` as a steady-state window at
concurrency ``c`` on that live server (the workload's warm-up before each), archived as a
step of kind ``bench`` with its own requests; the server has its own archive (kind
``server``: argv, engine log).

- :func:`closed_loop_problems`: when one server may stand in for each value (the validity
  rule, defined once);
- :class:`ScanServer`: the live server and one window per level;
- :func:`level_failure`: a level that marks the memory ceiling (preemptions or the KV cache
  at least :data:`KV_FULL` full: ``kv_cache_full``) or a dead server (``engine_died``);
- :func:`confirmation_problems`: why a sustained run of the chosen value rejects it (a value
  chosen from a scan is confirmed by a launch of its own).
"""

from __future__ import annotations

from pathlib import Path

from model_optimizer.events import EventCallback
from model_optimizer.load.figures import Figures
from model_optimizer.recipe import LoadedRecipe, RecipeSpec
from model_optimizer.recipe.render import Recipe
from model_optimizer.runner import RunOutcome, bench_endpoint, check_model_present, serve

KV_FULL = 0.99


def closed_loop_problems(recipe: Recipe) -> list[str]:
    """Why the workload does not let one large server stand in for a launch per
    max_num_seqs value (empty when it does): the client must hold max_num_seqs requests in
    flight in a closed loop."""
    workload, problems = RecipeSpec.of(recipe).workload, []
    if workload.concurrency is not None:
        problems.append("workload.concurrency is set: the concurrency must follow "
                        "max_num_seqs (null) for one server to stand in for each value")
    if workload.request_rate != "inf":
        problems.append("workload.request_rate is a number: an open-loop load does not "
                        "hold c requests in flight, so a larger server batches differently")
    return problems


def level_failure(outcome: RunOutcome) -> str | None:
    """``kv_cache_full`` (the memory ceiling: the KV cache full without preemptions counted),
    ``engine_died`` (the window failed or completed nothing), or None for a good window."""
    figures, peaks = Figures.of(outcome.metrics), outcome.telemetry_peaks or {}
    if (peaks.get("kv_cache_usage_perc_max") or 0) >= KV_FULL and not peaks.get("preemptions"):
        return "kv_cache_full"
    if not outcome.ok or not figures.completed:
        return "engine_died"
    return None


class ScanServer:
    """The live scan server (a context manager) and one steady-state window per level.

    ``server`` is the recipe as launched (its max_num_seqs the ceiling); ``server_extra``
    goes into the server's run.json, the ``extra`` of :meth:`window` into each level's.
    """

    def __init__(self, server: LoadedRecipe, steps_dir: Path, ceiling: int,
                 emit: EventCallback, server_extra: dict,
                 engine_factory=None):
        self.server, self.steps_dir, self.ceiling = server, steps_dir, ceiling
        self.emit, self.server_extra, self.engine_factory = emit, server_extra, engine_factory
        self._context = None
        self.engine = None
        self.outcome: RunOutcome | None = None

    def __enter__(self) -> ScanServer:
        self._context = serve(self.server, self.steps_dir, on_event=self.emit,
                              archive_extra=self.server_extra,
                              engine_factory=self.engine_factory)
        self.engine, self.outcome = self._context.__enter__()
        return self

    def __exit__(self, *exc_info) -> bool:
        return bool(self._context.__exit__(*exc_info))

    @property
    def started(self) -> bool:
        """True when the scan server is up."""
        return self.engine is not None

    def alive(self) -> bool:
        """True while the scan server runs."""
        return self.engine is not None and self.engine.alive()

    def window(self, level: int, extra: dict) -> RunOutcome:
        """One steady-state window at concurrency ``level`` on the live server."""
        recipe = self.server.varied({"workload.concurrency": int(level)},
                                    f"scan level {int(level)}")
        location = check_model_present(recipe)
        return bench_endpoint(
            self.engine.base_url, recipe, recipe.spec.model.served_name,
            recipe.spec.model.tokenizer or location, self.steps_dir,
            on_event=self.emit, server_pid=self.engine.pid,
            archive_extra={**extra, "server_run": self.outcome.run_id})


def confirmation_problems(outcome: RunOutcome, recipe: Recipe) -> list[str]:
    """Why a sustained run rejects its value (empty when it passes)."""
    problems = []
    if not outcome.ok:
        problems.append(f"run {outcome.status}")
    figures = Figures.of(outcome.metrics)
    if figures.failed:
        problems.append(f"{figures.failed} requests failed")
    if (outcome.telemetry_peaks or {}).get("preemptions"):
        problems.append(f"{outcome.telemetry_peaks['preemptions']} preemptions")
    if outcome.ok and RecipeSpec.of(recipe).slo.sets_any() and not figures.slo_met:
        problems.append("SLOs broken: " + "; ".join(figures.slo_violations or []))
    return problems
