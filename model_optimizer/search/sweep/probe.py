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
the memory ceiling (``kv_cache_full`` counts as a memory failure). A scan server that fails
to start *for memory* (``oom``, ``kv_cache_too_small``) is relaunched once at a lowered
ceiling (``search.scanrules.lowered_ceiling``, the bisection rule the tune and the simulator
share); the range the failure cut off is then one the scan cannot see, so
a choice at the lowered ceiling is not resolved (``search/sweep/decide.py``
:func:`~model_optimizer.search.sweep.decide.cut_range_unresolved`). Any other
start failure, or a second one, falls back to one launch per value.

Valid only when the client concurrency follows max_num_seqs in a closed loop (see
:func:`probe_scan_problems`); otherwise the sweep relaunches for every value.
"""

from __future__ import annotations

import math
from pathlib import Path

from model_optimizer.errors import UsageError
from model_optimizer.events import EventCallback, ProbeServerStarted
from model_optimizer.load.figures import Figures
from model_optimizer.plan import estimate
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.recipe.render import Recipe
from model_optimizer.recipe.sweep_rules import AUTO, AUTO_SCAN, RELAUNCH, SCANNING, STRATEGIES
from model_optimizer.search.core.scan import (
    KV_FULL,
    ScanServer,
    closed_loop_problems,
    level_failure,
)
from model_optimizer.search.core.scanrules import MAX_SCAN_SERVERS
from model_optimizer.search.measure import step_figures
from model_optimizer.search.sweep.strategy import Point, SweepConfig

#: why each scanning strategy, in the report; auto adds why it is the one chosen
AUTO_WHY = " (auto: the strategy the search simulator's table favours)"
SCAN_WHY = {
    "probe-fit": "one server at the ceiling scanned up and down, the knee from a curve fitted "
                 "over every window",
    "probe-scan": "one server at the ceiling, the concurrency scanned on it",
}
__all__ = ["KV_FULL", "MAX_SCAN_SERVERS", "SCANNING", "STRATEGIES", "ProbeServer",
           "level_point", "probe_scan_problems", "resolve_strategy", "scan_ceiling"]


def probe_scan_problems(recipe: Recipe, config: SweepConfig) -> list[str]:
    """Why probe-scan cannot stand in for relaunching here (empty when it can)."""
    problems = []
    if config.param != "max_num_seqs" or config.categorical:
        problems.append(f"it scans max_num_seqs only, not {config.param} (a knob that "
                        "needs a restart)")
    return problems + closed_loop_problems(recipe)


def resolve_strategy(requested: str, recipe: Recipe, config: SweepConfig) -> tuple[str, str]:
    """``(strategy, why)``: ``auto`` picks :data:`AUTO_SCAN` (probe-fit) where a scan is valid,
    relaunch where not; an explicit scanning strategy that is not valid is a usage error
    naming the reasons."""
    if requested not in STRATEGIES:
        raise UsageError(f"--strategy {requested}: choose one of {', '.join(STRATEGIES)}")
    problems = probe_scan_problems(recipe, config)
    if requested == RELAUNCH:
        return RELAUNCH, "asked for (--strategy relaunch)"
    if not problems:
        chosen = AUTO_SCAN if requested == AUTO else requested
        return chosen, SCAN_WHY[chosen] + (AUTO_WHY if requested == AUTO else "")
    if requested in SCANNING:
        raise UsageError(f"--strategy {requested} is not valid here: " + "; ".join(problems)
                         + ". Use --strategy relaunch.")
    return RELAUNCH, "probe-scan is not valid: " + "; ".join(problems)


def scan_ceiling(loaded: LoadedRecipe, config: SweepConfig, model_config: dict | None) -> int:
    """M: ``sweep.max``, lowered to the planner's largest max_num_seqs without preemption."""
    limits = [math.floor(config.max)] if config.max is not None else []
    if model_config is not None:
        limits.append(estimate(loaded.resolved, model_config).max_seqs_no_preemption)
    if not limits:
        raise UsageError("probe-scan needs a ceiling: give --max (or a model config.json the "
                         "planner can read), or use --strategy relaunch")
    return max(1, min(limits))


class ProbeServer(ScanServer):
    """The live scan server (``search/core/scan.py``) and the measure function the sweep loop
    calls for each level."""

    def __init__(self, loaded: LoadedRecipe, steps_dir: Path, ceiling: int, objective: str,
                 sweep_id: str, emit: EventCallback, engine_factory=None,
                 strategy: str = "probe-scan"):
        super().__init__(loaded.varied({"engine.max_num_seqs": ceiling},
                                       f"probe server ceiling {ceiling}"), steps_dir,
                         ceiling, emit, {"sweep": sweep_id, "probe_server": True,
                                         "value": ceiling}, engine_factory)
        self.loaded, self.objective, self.sweep_id = loaded, objective, sweep_id
        self.strategy = strategy

    def __enter__(self) -> ProbeServer:
        self.emit(ProbeServerStarted(self.ceiling, self.strategy))
        super().__enter__()
        return self

    def measure(self, value, phase: str) -> tuple[Point, dict]:
        """One level: a steady-state window at concurrency ``value`` on the live server."""
        if value > self.ceiling or not self.engine.alive():
            kind = "engine_died" if value <= self.ceiling else "planner"
            return Point(value, phase, "failed" if kind == "engine_died" else "skipped", [],
                         failure_kind=kind), {"status": "failed", "failure": kind}
        outcome = self.window(value, {"sweep": self.sweep_id, "value": value, "probe": True})
        return level_point(value, phase, outcome, self.objective), step_figures(outcome)


def level_point(value, phase: str, outcome, objective: str) -> Point:
    """The strategy's view of one scan level: its objective and interval, or the ceiling."""
    figures, peaks = Figures.of(outcome.metrics), outcome.telemetry_peaks or {}
    run_ids = [outcome.run_id]
    failure = level_failure(outcome)
    if failure is not None:
        return Point(value, phase, "failed", [], failure_kind=failure, run_ids=run_ids)
    return Point(value, phase, "ok", [figures.figure(objective) or 0.0],
                 slo_met=bool(figures.slo_met), preemptions=peaks.get("preemptions") or 0,
                 run_ids=run_ids, half_width=figures.half_width(objective),
                 slo_ratios=[] if figures.slo_ratio is None else [figures.slo_ratio])
