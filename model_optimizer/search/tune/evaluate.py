"""One trial's verdict for optuna: objective values and SLO constraints from what was
measured, with failures kept as data.

Constraints are named, set with optuna's ``Trial.set_constraint`` (a trial is feasible when
every value is <= 0), the same names for every trial:

- ``launch``: 0 when every run of the trial completed, 1 when one failed;
- then one per SLO bound set in the recipe (``ttft_p99_ms``, ...), the relative margin of the
  worst repeat:
  ``(measured - bound) / bound`` for upper bounds (``ttft_p99_ms``, ...) and
  ``(bound - measured) / bound`` for lower bounds (``min_qps``, ``min_success_rate``);
  negative is slack, positive the size of the violation, 1 when the run gave no figure.

A failed launch scores 0 on the objective (it served nothing), ``inf`` on the second
objective (p99 TTFT) and 1 on every constraint: a finished, infeasible trial the sampler
(TPE reads the constraints) learns from. A planner-skipped trial has no values (optuna's
PRUNED) and the same all-infeasible constraints.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from model_optimizer.archive import utc_now
from model_optimizer.archive.names import (
    FAILURE_FILE,
    METRICS_FILE,
)
from model_optimizer.search.measure import Measurement
from model_optimizer.search.tune.space import TuneConfig

FAILED_CONSTRAINT = 1.0
LOG_EXCERPT_LINES = 12


@dataclass
class TrialResult:
    """What one trial measured: the shared Measurement plus what its run archives hold."""

    measurement: Measurement
    run_metrics: list[dict] = field(default_factory=list)   # metrics.json of each run
    failure: dict | None = None                             # failure.json of the failed run

    @property
    def status(self) -> str:
        """ok | failed | skipped."""
        return self.measurement.status

    def log_excerpt(self) -> list[str]:
        """The engine log lines that decided the failure class (empty when none)."""
        return list((self.failure or {}).get("evidence") or [])[:LOG_EXCERPT_LINES]


def slo_bounds(recipe: dict) -> dict[str, float]:
    """The SLO bounds the recipe sets, in schema order; a class's as ``class:bound``."""
    bounds = {key: bound for key, bound in recipe["slo"].items()
              if bound is not None and key != "classes"}
    for name, own in (recipe["slo"].get("classes") or {}).items():
        bounds.update({f"{name}:{key}": bound for key, bound in own.items() if bound is not None})
    return bounds


def slo_margin(key: str, bound: float, metrics: dict) -> float:
    """Relative margin of one run against one bound: <= 0 met, > 0 violated."""
    scale = abs(bound) or 1.0
    if ":" in key:  # a class's bound: that class's figures
        name, key = key.split(":", 1)
        metrics = (metrics.get("classes") or {}).get(name) or {}
    if key.startswith("min_"):
        actual = metrics.get(key.removeprefix("min_"))
        return FAILED_CONSTRAINT if actual is None else (bound - actual) / scale
    actual = metrics.get(key)
    return FAILED_CONSTRAINT if actual is None else (actual - bound) / scale


def constraint_values(result: TrialResult, bounds: dict[str, float]) -> dict[str, float]:
    """The named constraints of a trial, ``launch`` first (see the module docstring)."""
    names = ["launch", *bounds]
    if result.status != "ok":
        return dict.fromkeys(names, FAILED_CONSTRAINT)
    runs = result.run_metrics or [result.measurement.figures]
    margins = [round(max(slo_margin(key, bound, run) for run in runs), 6)
               for key, bound in bounds.items()]
    return dict(zip(names, [0.0, *margins], strict=True))


def objective_values(result: TrialResult, config: TuneConfig) -> list[float] | None:
    """optuna values: the median objective (and median p99 TTFT); None when skipped."""
    if result.status == "skipped":
        return None
    samples = result.measurement.samples
    ok = result.status == "ok"
    values = [float(statistics.median(samples)) if ok and samples else 0.0]
    if config.second_metric:
        runs = result.run_metrics or [result.measurement.figures]
        seen = [run[config.second_metric] for run in runs
                if run.get(config.second_metric) is not None]
        values.append(float(statistics.median(seen)) if ok and seen else math.inf)
    return values


def trial_verdict(result: TrialResult, bounds: dict[str, float], config: TuneConfig,
                  hardware: str, machine: str) -> tuple[dict, dict, list[float] | None]:
    """``(user attributes, constraints, values)`` optuna is told for one measured trial
    (values None: PRUNED)."""
    measured = result.measurement
    constraints = constraint_values(result, bounds)
    attrs = {"status": measured.status, "failure_kind": measured.failure_kind,
             "reason": measured.reason, "log_excerpt": result.log_excerpt(),
             "run_ids": measured.run_ids, "launches": len(measured.run_ids),
             "figures": measured.figures, "samples": measured.samples,
             "half_width": measured.half_width, "slo_met": measured.slo_met,
             "feasible": measured.status == "ok" and all(c <= 0 for c in constraints.values()),
             "hardware": hardware, "machine_measured": machine, "finished_at": utc_now()}
    return attrs, constraints, objective_values(result, config)


def read_trial_result(measurement: Measurement, runs_base: Path) -> TrialResult:
    """A Measurement completed with the metrics and failure its run archives hold."""
    metrics = [_read_json(runs_base / run_id / METRICS_FILE) for run_id in
               measurement.run_ids]
    failure = None
    if measurement.status == "failed" and measurement.run_ids:
        failure = _read_json(runs_base / measurement.run_ids[-1] / FAILURE_FILE) or None
    return TrialResult(measurement, [m for m in metrics if m], failure)


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
