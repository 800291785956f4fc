"""Measure one engine configuration for a search (sweep or tune): planner check, repeated
runs, and the figures a search compares. Shared so the strategies have one loop body.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from model_optimizer.engine.factory import EngineFactory
from model_optimizer.events import EventCallback
from model_optimizer.load.figures import FIGURE_KEYS, Figures
from model_optimizer.plan import fits
from model_optimizer.plan.kvcache import cpu_kv_dtype_problem
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.runner import RunOutcome, run_recipe
from model_optimizer.telemetry import cpu_flags

__all__ = ["FIGURE_KEYS", "RESOURCE_KEYS", "Measurement", "measure_configuration",
           "objective_half_width", "planner_verdict", "step_figures"]
#: what the configuration cost, from the telemetry peaks (step figures only)
RESOURCE_KEYS = ("peak_memory_bytes", "kv_cache_usage_max", "preemptions")


@dataclass
class Measurement:
    """The result of measuring one configuration (all repeats)."""

    status: str                       # ok | failed | skipped
    samples: list[float] = field(default_factory=list)  # objective per repeat
    slo_met: bool | None = None
    preemptions: float = 0.0
    failure_kind: str | None = None   # classifier class, or "planner" when skipped
    reason: str | None = None         # why skipped / failed, in words
    run_ids: list[str] = field(default_factory=list)
    figures: dict = field(default_factory=dict)
    half_widths: list[float] = field(default_factory=list)  # 95% half-width per repeat

    @property
    def half_width(self) -> float | None:
        """The widest 95% half-width of the objective over the repeats (None without)."""
        return max(self.half_widths) if self.half_widths else None


def planner_verdict(step: LoadedRecipe, model_config: dict | None) -> str | None:
    """Why the planner says this configuration cannot run well (``plan.fits`` without
    preemption), or None if it may or there is no model config to plan with."""
    if model_config is None:
        return None
    ok, reason = fits(step.resolved, model_config, without_preemption=True)
    return None if ok else reason


def machine_verdict(step: LoadedRecipe) -> str | None:
    """Why this machine's CPU cannot serve the configuration on vLLM's CPU engine (an fp8
    KV cache without AVX-512 or AMX), or None: checked before a launch that would fail."""
    if step.resolved["hardware"]["accelerator"] != "cpu":
        return None
    return cpu_kv_dtype_problem(step.resolved["engine"].get("kv_cache_dtype") or "auto",
                                cpu_flags())


def objective_half_width(metrics: dict | Figures, objective: str) -> float | None:
    """The 95% half-width of the objective's steady-state interval, None without one."""
    return Figures.of(metrics).half_width(objective)


def step_figures(outcome: RunOutcome | None) -> dict:
    """The per-configuration figures the summaries show (``FIGURE_KEYS``, the QPS and
    goodput half-widths, status and resources)."""
    if outcome is None:
        return {}
    measured, peaks = outcome.figures, outcome.telemetry_peaks or {}
    figures = measured.compared()
    figures.update({f"{k}_half_width": measured.half_width(k) for k in ("qps", "goodput_qps")})
    figures.update({
        "status": outcome.status, "run_id": outcome.run_id,
        "failure": outcome.failure.kind if outcome.failure else None,
        "peak_memory_bytes": peaks.get("gpu_mem_used_bytes_max") or peaks.get("rss_bytes_max"),
        "kv_cache_usage_max": peaks.get("kv_cache_usage_perc_max"),
        "preemptions": peaks.get("preemptions"),
    })
    return figures


#: A search's quality gate: the verdict on a configuration (an object with ``passed``,
#: ``summary`` and ``to_dict()``, e.g. ``quality.GateResult``), or None when not gated.
QualityGate = Callable[[LoadedRecipe], object]


def measure_configuration(step: LoadedRecipe, runs_base: Path, *, repeats: int,
                          objective: str, model_config: dict | None = None,
                          on_event: EventCallback | None = None,
                          archive_extra: dict | None = None,
                          engine_factory: EngineFactory | None = None,
                          quality_gate: QualityGate | None = None,
                          while_serving: Callable[[str], None] | None = None) -> Measurement:
    """Planner check, quality gate, then ``repeats`` archived runs; stops repeating at the
    first failure. A configuration that fails the gate is a failure of kind ``quality``
    (nothing is load-tested); the gate's verdict is in ``figures["quality"]``.

    ``engine_factory`` chooses the server process (default: vLLM; tests use the mock).
    ``while_serving(base_url)`` runs on the first repeat's server after its load test (the
    optimize gate evaluates quality there, without a launch of its own).
    """
    verdict = planner_verdict(step, model_config) or (
        machine_verdict(step) if engine_factory is None else None)  # the mock runs anything
    if verdict is not None:
        return Measurement("skipped", failure_kind="planner", reason=verdict,
                           figures={"status": "skipped", "reason": verdict})
    quality = quality_gate(step) if quality_gate is not None else None
    if quality is not None and not quality.passed:
        return Measurement("failed", failure_kind="quality", reason=quality.summary,
                           figures={"status": "failed:quality", "failure": "quality",
                                    "reason": quality.summary, "quality": quality.to_dict()})
    result = Measurement("ok", slo_met=True)
    outcome: RunOutcome | None = None
    for repeat in range(repeats):
        outcome = run_recipe(step, runs_base, on_event=on_event,
                             archive_extra={**(archive_extra or {}), "repeat": repeat},
                             engine_factory=engine_factory,
                             while_serving=while_serving if repeat == 0 else None)
        result.run_ids.append(outcome.run_id)
        if not outcome.ok:
            result.status = "failed"
            result.failure_kind = outcome.failure.kind if outcome.failure else "unknown"
            result.reason = outcome.failure.hint if outcome.failure else outcome.status
            result.samples, result.slo_met = [], None
            break
        measured = outcome.figures
        result.samples.append(measured.figure(objective) or 0.0)
        half_width = measured.half_width(objective)
        if half_width is not None:
            result.half_widths.append(half_width)
        result.slo_met = result.slo_met and bool(measured.slo_met)
        result.preemptions = max(result.preemptions,
                                 outcome.telemetry_peaks.get("preemptions") or 0)
    result.figures = step_figures(outcome)
    if quality is not None:
        result.figures["quality"] = quality.to_dict()
    return result
