"""``mopt diff A B``: recipe fields that differ, and metric deltas judged against noise.

A side is a run (or bench) archive, a sweep (its written recipe, figures of the run that
measured the chosen value), a tune or rollback archive (its written recipe, fields only)
or a recipe file (fields only). Recipes are compared resolved (defaults filled in; a run's
workload as it was actually run), leaf by leaf, as dotted paths. ``name``,
``description``, ``revision`` and ``validated`` are bookkeeping, and ``sweep.*`` only
steers ``mopt sweep`` (a run never reads it): they are listed but not counted as changed
*variables*. When more than one variable changed, the comparison cannot say which one
mattered, and a warning says so.

Significance: see :mod:`model_optimizer.history.stats` (Mann-Whitney U on per-request
TTFT/TPOT/E2E; block bootstrap over completion gaps for QPS and output tok/s; alpha 0.01,
a minimum effect of 10%, and no more than the runs' own drift between their halves).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_optimizer.archive.names import (
    METRICS_FILE,
    WRITTEN_RECIPE,
)
from model_optimizer.archive.report import fmt
from model_optimizer.history import archives, stats
from model_optimizer.load.stats import request_tpot_s
from model_optimizer.recipe import load_recipe, load_recipe_text

BOOKKEEPING = ("name", "description", "revision", "validated")
NOT_MEASURED = ("sweep",)
RATE_METRICS = (("qps", None), ("output_tok_s", "output_tokens"))
LATENCY_METRICS = ("ttft", "tpot", "e2e")
RECIPE_SUFFIXES = (".yaml", ".yml")
QUALITY_KEYS = ("accuracy", "exact_match_rate", "top1_agreement", "mean_kl", "max_kl",
                "mean_first_divergence", "accuracy_drop", "gate_passed", "baseline_run")


@dataclass
class Side:
    """One side of a comparison."""

    label: str
    kind: str
    recipe: dict | None
    metrics: dict | None = None
    requests: list[dict] | None = None
    note: str = ""
    environment: dict | None = None  # vLLM version and hardware the run saw (runs only)
    quality: dict | None = None      # quality figures (eval archives, validated blocks)
    status: str | None = None  # the run's status.json (runs only)

    @property
    def concurrency(self) -> int:
        """Requests in flight during the load (bootstrap block length)."""
        workload = (self.recipe or {}).get("workload") or {}
        return int(workload.get("concurrency") or 1)

    def describe(self) -> str:
        """One line: what this side is."""
        recipe = self.recipe or {}
        text = f"{self.label} ({self.kind}; {recipe.get('name')} revision {recipe.get('revision')}"
        if self.status:
            text += f", {self.status}"
        return text + ")" + (f": {self.note}" if self.note else "")


@dataclass
class FieldChange:
    """One recipe leaf that differs."""

    path: str
    a: Any
    b: Any
    counted: bool

    def to_dict(self) -> dict:
        """JSON form."""
        return {"path": self.path, "a": self.a, "b": self.b, "counted": self.counted}


@dataclass
class MetricRow:
    """One figure on both sides, its change, and the judgement."""

    metric: str
    a: float | None
    b: float | None
    judgement: stats.Judgement

    @property
    def change(self) -> float | None:
        """Relative change B vs A."""
        return stats.relative_change(self.a, self.b)

    def to_dict(self) -> dict:
        """JSON form."""
        delta = None if self.a is None or self.b is None else self.b - self.a
        return {"metric": self.metric, "a": self.a, "b": self.b, "delta": delta,
                "relative_change": self.change, **self.judgement.to_dict()}


@dataclass
class DiffResult:
    """Everything ``mopt diff`` reports."""

    a: Side
    b: Side
    fields: list[FieldChange] = field(default_factory=list)
    metrics: list[MetricRow] = field(default_factory=list)
    alpha: float = stats.ALPHA
    min_effect: float = stats.MIN_EFFECT

    @property
    def variables(self) -> list[str]:
        """The changed fields that count as experimental variables."""
        return [f.path for f in self.fields if f.counted]

    @property
    def warning(self) -> str | None:
        """Set when more than one variable changed."""
        changed = self.variables
        if len(changed) <= 1:
            return None
        return (f"{len(changed)} recipe fields changed at once ({', '.join(changed)}): a "
                "comparison that changes several things at once cannot say which one "
                "mattered")

    @property
    def coalesced(self) -> list[str]:
        """Sides whose TPOT cannot be judged: the client could not time too many decodes."""
        out = []
        for side in (self.a, self.b):
            share = stats.coalesced_fraction(side.requests or [])
            if share > stats.COALESCED_LIMIT:
                out.append(f"{side.label}: the client could not time {share:.0%} of its "
                           "requests' decode (their chunks reached it in one socket read: "
                           "it read late), so TPOT is not judged")
        return out

    @property
    def quality_rows(self) -> list[tuple[str, Any, Any]]:
        """Quality figures present on either side: ``(figure, a, b)``."""
        a, b = self.a.quality or {}, self.b.quality or {}
        keys = [k for k in QUALITY_KEYS if k in a or k in b]
        keys += sorted(k for k in set(a) | set(b) if k.startswith("lm_eval.") and k not in keys)
        return [(k, a.get(k), b.get(k)) for k in keys]

    def significant(self) -> list[str]:
        """Metrics whose change is significant."""
        return [row.metric for row in self.metrics if row.judgement.significant]

    def to_dict(self) -> dict:
        """JSON form."""
        return {"a": self.a.describe(), "b": self.b.describe(),
                "fields": [f.to_dict() for f in self.fields], "variables": self.variables,
                "warning": self.warning, "coalesced": self.coalesced,
                "metrics": [m.to_dict() for m in self.metrics],
                "significant": self.significant(),
                "quality": [{"figure": k, "a": a, "b": b} for k, a, b in self.quality_rows],
                "method": {"alpha": self.alpha, "min_effect": self.min_effect,
                           "latency_test": "Mann-Whitney U, two-sided, normal approximation",
                           "throughput_test": "circular block bootstrap of completion gaps "
                                              "(block = concurrency), percentile interval "
                                              "of B/A; within-run noise only",
                           "significant_when": "test rejects, |change| >= min_effect and "
                                               ">= each run's drift between its halves"}}


# ----- building the sides ------------------------------------------------------------------
def is_recipe_file(ref: str | Path) -> bool:
    """True for an existing YAML file (a recipe), as opposed to an archive reference."""
    path = Path(ref)
    return path.is_file() and path.suffix in RECIPE_SUFFIXES


def side_of(ref: str | Path, runs_base: str | Path) -> Side:
    """Build a side from a recipe file or an archive reference (archives are verified)."""
    if is_recipe_file(ref):
        resolved = load_recipe(ref).resolved
        return Side(str(ref), "recipe file", resolved, quality=validated_quality(resolved))
    view = archives.load(ref, runs_base)
    if view.kind == "eval":
        return Side(str(view.path), "eval", archives.effective_recipe(view),
                    note="quality only (no load test)", environment=_environment(view.run),
                    quality=eval_quality(view.json("quality.json")))
    if view.kind in ("sweep", "tune"):
        return _search_side(view)
    if view.kind == "rollback":
        written = view.text(WRITTEN_RECIPE)
        recipe = resolved_from_text(written)
        return Side(str(view.path), "rollback", recipe, note="fields only (no measurement)",
                    quality=validated_quality(recipe))
    return run_side(view, str(view.path))


def run_side(view: archives.ArchiveView, label: str, kind: str | None = None) -> Side:
    """A measured run as a side: effective recipe, metrics.json, measured requests."""
    return Side(label, kind or view.kind, archives.effective_recipe(view),
                view.json(METRICS_FILE), view.requests(), environment=_environment(view.run),
                status=view.status_text)


def validated_quality(resolved: dict | None) -> dict | None:
    """The quality figures of a recipe's validated block, flat."""
    quality = ((resolved or {}).get("validated") or {}).get("quality")
    if not isinstance(quality, dict):
        return None
    return {**(quality.get("figures") or {}), "gate_passed": quality.get("passed"),
            "baseline_run": quality.get("baseline_run")}


def eval_quality(record: dict) -> dict | None:
    """The figures of an eval archive's quality.json, flat."""
    if not record:
        return None
    comparison = record.get("comparison") or {}
    gate = record.get("gate") or {}
    out = {"accuracy": (record.get("figures") or {}).get("accuracy"),
           **(comparison.get("figures") or {})}
    if gate:
        out["gate_passed"] = gate.get("passed")
    out["baseline_run"] = record.get("baseline_run")
    return out


def _environment(run: dict) -> dict | None:
    """What outside the recipe shapes a measurement: vLLM's version and the hardware."""
    if not run:
        return None
    hardware = run.get("hardware") or {}
    gpus = [g.get("name") for g in hardware.get("gpus") or []]
    return {"vllm": (run.get("versions") or {}).get("vllm"),
            "hardware": gpus or hardware.get("cpu_model")}


def _search_side(view: archives.ArchiveView) -> Side:
    written = view.text(WRITTEN_RECIPE)
    recipe = resolved_from_text(written) if written else None
    step = archives.chosen_step(view)
    if step is None:
        return Side(str(view.path), view.kind, recipe, note="fields only (no chosen run)")
    measured = run_side(archives.open_archive(step), str(view.path), view.kind)
    measured.recipe = recipe or measured.recipe
    measured.note = f"figures of {step.name}, the run that measured the chosen value"
    measured.quality = validated_quality(recipe)
    return measured


def resolved_from_text(text: str | None) -> dict | None:
    """Resolved recipe from text; None when absent."""
    return None if text is None else load_recipe_text(text).resolved


# ----- comparing -----------------------------------------------------------------------------
def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Leaves of nested mappings as ``{"engine.max_num_seqs": 8, ...}`` (lists are leaves).

    An empty mapping has no leaves: ``env: {}`` and ``env: {A: x}`` differ in ``env.A`` only.
    """
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value} if prefix else {}


def field_changes(a: dict | None, b: dict | None) -> list[FieldChange]:
    """Every leaf that differs between two resolved recipes, in path order."""
    flat_a, flat_b = flatten(a or {}), flatten(b or {})
    changes = []
    for path in sorted(set(flat_a) | set(flat_b)):
        left, right = flat_a.get(path), flat_b.get(path)
        if left != right:
            top = path.split(".", 1)[0]
            changes.append(FieldChange(path, left, right,
                                       top not in BOOKKEEPING + NOT_MEASURED))
    return changes


def latency_samples_ms(requests: list[dict], metric: str) -> list[float]:
    """Per-request values in ms, in the order the requests were sent."""
    done = sorted((r for r in requests if r.get("ok")), key=lambda r: r.get("sent_at") or 0)
    if metric == "tpot":
        values = [request_tpot_s(r) for r in done]
    else:
        values = [r.get(f"{metric}_s") for r in done]
    return [v * 1000.0 for v in values if v is not None]


_TAIL = stats.Judgement("none", False, "not judged",
                        note="a tail percentile is one value per run; the p50 row's test "
                             "covers the whole distribution")


def metric_rows(a: Side, b: Side, alpha: float, min_effect: float) -> list[MetricRow]:
    """Throughput and latency rows with their judgements (empty unless both were measured)."""
    if a.metrics is None or b.metrics is None:
        return []
    req_a, req_b = a.requests or [], b.requests or []
    rows = []
    for key, weight in RATE_METRICS:
        judgement = stats.judge_rate(
            stats.completion_gaps(req_a, weight), stats.completion_gaps(req_b, weight),
            a.metrics.get(key), b.metrics.get(key), (a.concurrency, b.concurrency),
            alpha, min_effect)
        rows.append(MetricRow(key, a.metrics.get(key), b.metrics.get(key), judgement))
    for metric in LATENCY_METRICS:
        judgement = stats.judge_samples(latency_samples_ms(req_a, metric),
                                        latency_samples_ms(req_b, metric), alpha, min_effect)
        rows.append(MetricRow(f"{metric}_p50_ms", a.metrics.get(f"{metric}_p50_ms"),
                              b.metrics.get(f"{metric}_p50_ms"), judgement))
        rows.append(MetricRow(f"{metric}_p99_ms", a.metrics.get(f"{metric}_p99_ms"),
                              b.metrics.get(f"{metric}_p99_ms"), _TAIL))
    return rows


def compare(a: Side, b: Side, alpha: float = stats.ALPHA,
            min_effect: float = stats.MIN_EFFECT) -> DiffResult:
    """The full comparison of two sides (TPOT unjudged when a side's outputs coalesced)."""
    result = DiffResult(a, b, field_changes(a.recipe, b.recipe),
                        metric_rows(a, b, alpha, min_effect), alpha, min_effect)
    if not result.variables and a.environment and a.environment == b.environment:
        _mark_run_to_run(result)
    if result.coalesced:
        unjudged = stats.Judgement("none", False, "not judged",
                                   note="outputs arrived in one chunk: decode not observed")
        for row in result.metrics:
            if row.metric.startswith("tpot_"):
                row.judgement = unjudged
    return result


RUN_TO_RUN = ("identical configuration, vLLM version and hardware: nothing changed to "
              "attribute this to, so it is the run-to-run variance of the machine")


def _mark_run_to_run(result: DiffResult) -> None:
    """Two runs of one configuration on one environment: differences are noise by design.

    The within-run tests cannot see run-to-run variance (a busy or throttled machine slows a
    whole run), so a 'significant' verdict here would blame a change that did not happen.
    The figures stay; the verdict says what they measure.
    """
    for row in result.metrics:
        if row.judgement.significant:
            row.judgement = stats.Judgement(row.judgement.test, False, "run-to-run noise",
                                            p_value=row.judgement.p_value,
                                            interval=row.judgement.interval,
                                            note=RUN_TO_RUN)


def diff(ref_a: str | Path, ref_b: str | Path, runs_base: str | Path,
         alpha: float = stats.ALPHA, min_effect: float = stats.MIN_EFFECT) -> DiffResult:
    """Compare two runs, sweeps or recipe files (archives verified first)."""
    return compare(side_of(ref_a, runs_base), side_of(ref_b, runs_base), alpha, min_effect)


# ----- text -----------------------------------------------------------------------------------
def _value(value: Any) -> str:
    return fmt(value, 2) if isinstance(value, float) else ("null" if value is None
                                                            else str(value))


def _quality_value(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else _value(value)


def _verdict_text(row: MetricRow, alpha: float) -> str:
    judgement, details = row.judgement, []
    if judgement is _TAIL:
        return "(tail, not judged)"
    if judgement.p_value is not None:
        details.append(f"p={judgement.p_value:.2g}")
    if judgement.interval is not None:
        low, high = judgement.interval
        details.append(f"{1 - alpha:.0%} CI of B/A [{low:.3f}, {high:.3f}]")
    if judgement.note:
        details.append(judgement.note)
    return judgement.verdict + (f" ({'; '.join(details)})" if details else "")


def render(result: DiffResult) -> list[str]:
    """The diff as lines of text for humans."""
    lines = [f"A: {result.a.describe()}", f"B: {result.b.describe()}", ""]
    if result.fields:
        width = max(len(f.path) for f in result.fields)
        lines.append("Recipe fields that differ (resolved):")
        for change in result.fields:
            mark = "" if change.counted else "   (not a variable)"
            lines.append(f"  {change.path:<{width}}  {_value(change.a)} -> "
                         f"{_value(change.b)}{mark}")
    else:
        lines.append("Recipe fields: identical configuration.")
    if result.warning:
        lines += ["", f"warning: {result.warning}"]
    lines += [f"warning: {note}" for note in result.coalesced]
    if result.metrics:
        lines += ["", "Figures (B vs A):",
                  f"  {'metric':<14} {'A':>10} {'B':>10} {'change':>8}  judgement"]
        for row in result.metrics:
            change = "-" if row.change is None else f"{row.change:+.1%}"
            lines.append(f"  {row.metric:<14} {fmt(row.a, 2):>10} {fmt(row.b, 2):>10} "
                         f"{change:>8}  {_verdict_text(row, result.alpha)}")
        lines += ["", f"Judged at alpha {result.alpha} with a minimum effect of "
                  f"{result.min_effect:.0%} (and beyond each run's drift between its own "
                  "halves): latencies by Mann-Whitney U on per-request samples; throughput "
                  "by a block bootstrap over completion gaps. Both see within-run noise "
                  "only: repeat runs to see run-to-run variance."]
    elif result.a.metrics is None or result.b.metrics is None:
        lines += ["", "Figures: not compared (a side has no measurement)."]
    if result.quality_rows:
        lines += ["", "Quality (against each side's baseline; the gate judges them):"]
        lines += [f"  {key:<22} {_quality_value(a):>12} {_quality_value(b):>12}"
                  for key, a, b in result.quality_rows]
    significant = result.significant()
    lines += ["", "Significant changes: " + (", ".join(significant) if significant
                                             else "none")]
    return lines
