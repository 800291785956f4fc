"""Probe-scan: one server, many batch sizes, for a ``max_num_seqs`` sweep.

A server launched with ``max_num_seqs = M`` that serves ``c <= M`` requests in flight
batches at most ``c`` sequences, as a server launched with ``max_num_seqs = c`` would: the
same KV pool and chunked-prefill budget, only fewer sequences to schedule. So instead of one
launch per value, the sweep launches once at the ceiling ``M`` (``sweep.max``, lowered to
the largest value the planner says runs without preemption) and scans the concurrency on that
live server: every value the strategy proposes is a steady-state window at concurrency
``c`` (with the workload's warm-up before it), archived as a step with its own requests
(kind ``bench``, ``probe: true``); the server has its own archive (kind ``server``: argv,
engine log). The same pure strategy and interval rules choose the levels, the top candidates
are re-measured interleaved on the same server, and the chosen value then gets one launch of
its own for the sustained confirmation: two launches in all.

A level whose window saw preemptions, or the KV cache at least :data:`KV_FULL` full, marks
the memory ceiling (``kv_cache_full`` counts as a memory failure).

Valid only when the client concurrency follows max_num_seqs in a closed loop (see
:func:`probe_scan_problems`); otherwise the sweep relaunches for every value.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from model_optimizer.errors import UsageError
from model_optimizer.load.figures import Figures
from model_optimizer.measure import step_figures, variant
from model_optimizer.plan import estimate
from model_optimizer.recipe import LoadedRecipe, RecipeSpec
from model_optimizer.recipe.render import Recipe
from model_optimizer.runner import bench_endpoint, check_model_present, serve
from model_optimizer.sweep.strategy import Point, SweepConfig

STRATEGIES = ("auto", "probe-scan", "relaunch")
KV_FULL = 0.99


def probe_scan_problems(recipe: Recipe, config: SweepConfig) -> list[str]:
    """Why probe-scan cannot stand in for relaunching here (empty when it can)."""
    workload, problems = RecipeSpec.of(recipe).workload, []
    if config.param != "max_num_seqs" or config.categorical:
        problems.append(f"it scans max_num_seqs only, not {config.param} (a knob that "
                        "needs a restart)")
    if workload.concurrency is not None:
        problems.append("workload.concurrency is set: the concurrency must follow "
                        "max_num_seqs (null) for one server to stand in for each value")
    if workload.request_rate != "inf":
        problems.append("workload.request_rate is a number: an open-loop load does not "
                        "hold c requests in flight, so a larger server batches differently")
    return problems


def resolve_strategy(requested: str, recipe: Recipe, config: SweepConfig) -> tuple[str, str]:
    """``(strategy, why)``: ``auto`` picks probe-scan where valid; an explicit probe-scan that
    is not valid is a usage error naming the reasons."""
    if requested not in STRATEGIES:
        raise UsageError(f"--strategy {requested}: choose one of {', '.join(STRATEGIES)}")
    problems = probe_scan_problems(recipe, config)
    if requested == "relaunch":
        return "relaunch", "asked for (--strategy relaunch)"
    if not problems:
        return "probe-scan", "one server at the ceiling, the concurrency scanned on it"
    if requested == "probe-scan":
        raise UsageError("--strategy probe-scan is not valid here: " + "; ".join(problems)
                         + ". Use --strategy relaunch.")
    return "relaunch", "probe-scan is not valid: " + "; ".join(problems)


def scan_ceiling(loaded: LoadedRecipe, config: SweepConfig, model_config: dict | None) -> int:
    """M: ``sweep.max``, lowered to the planner's largest max_num_seqs without preemption."""
    limits = [math.floor(config.max)] if config.max is not None else []
    if model_config is not None:
        limits.append(estimate(loaded.resolved, model_config).max_seqs_no_preemption)
    if not limits:
        raise UsageError("probe-scan needs a ceiling: give --max (or a model config.json the "
                         "planner can read), or use --strategy relaunch")
    return max(1, min(limits))


class ProbeServer:
    """The live scan server and the measure function the sweep loop calls for each level."""

    def __init__(self, loaded: LoadedRecipe, steps_dir: Path, ceiling: int, objective: str,
                 sweep_id: str, emit: Callable[[str, dict], None], engine_factory=None):
        self.loaded, self.steps_dir, self.ceiling = loaded, steps_dir, ceiling
        self.engine_factory = engine_factory
        self.objective, self.sweep_id, self.emit = objective, sweep_id, emit
        self.server = variant(loaded, [f"engine.max_num_seqs={ceiling}"])
        self._context = None
        self.engine = None
        self.outcome = None

    def __enter__(self) -> ProbeServer:
        self.emit("probe_server", {"max_num_seqs": self.ceiling})
        self._context = serve(self.server, self.steps_dir, on_event=self.emit,
                              archive_extra={"sweep": self.sweep_id, "probe_server": True,
                                             "value": self.ceiling},
                              engine_factory=self.engine_factory)
        self.engine, self.outcome = self._context.__enter__()
        return self

    def __exit__(self, *exc_info) -> bool:
        return bool(self._context.__exit__(*exc_info))

    @property
    def started(self) -> bool:
        """True when the scan server is up."""
        return self.engine is not None

    def measure(self, value, phase: str) -> tuple[Point, dict]:
        """One level: a steady-state window at concurrency ``value`` on the live server."""
        if value > self.ceiling or not self.engine.alive():
            kind = "engine_died" if value <= self.ceiling else "planner"
            return Point(value, phase, "failed" if kind == "engine_died" else "skipped", [],
                         failure_kind=kind), {"status": "failed", "failure": kind}
        level = variant(self.server, [f"workload.concurrency={int(value)}"])
        location = check_model_present(level)
        outcome = bench_endpoint(
            self.engine.base_url, level, level.spec.model.served_name,
            level.spec.model.tokenizer or location, self.steps_dir,
            on_event=self.emit, server_pid=self.engine.pid,
            archive_extra={"sweep": self.sweep_id, "value": value, "probe": True,
                           "server_run": self.outcome.run_id})
        return level_point(value, phase, outcome, self.objective), step_figures(outcome)


def level_point(value, phase: str, outcome, objective: str) -> Point:
    """The strategy's view of one scan level: its objective and interval, or the ceiling."""
    figures, peaks = Figures.of(outcome.metrics), outcome.telemetry_peaks or {}
    run_ids = [outcome.run_id]
    if (peaks.get("kv_cache_usage_perc_max") or 0) >= KV_FULL and not peaks.get("preemptions"):
        return Point(value, phase, "failed", [], failure_kind="kv_cache_full", run_ids=run_ids)
    if not outcome.ok or not figures.completed:
        return Point(value, phase, "failed", [], failure_kind="engine_died", run_ids=run_ids)
    return Point(value, phase, "ok", [figures.figure(objective) or 0.0],
                 slo_met=bool(figures.slo_met), preemptions=peaks.get("preemptions") or 0,
                 run_ids=run_ids, half_width=figures.half_width(objective))
