"""The quality gate inside a search (``sweep``, ``tune``): which candidates to evaluate,
against which baseline, evaluated once per search; and the refusal of a search that would
keep an output-changing candidate with no gate at all (:func:`require_gate`).

A candidate is gated when the recipe has a quality section with something to evaluate and
its configuration differs from the baseline's in a field that can change outputs
(:data:`quality.config.OUTPUT_CHANGING`). A candidate whose configuration equals the
baseline's passes without a launch: on vLLM fixed seeds make a configuration agree with
itself exactly (proven by tests/integration/test_quality.py), so there is nothing to
measure. The baseline is ``quality.baseline`` when set, else the recipe as given (before
the search's changes); its eval is archived under the search's ``steps/`` and its id kept,
so a resumed search does not evaluate it again.
"""

from __future__ import annotations

from pathlib import Path

from model_optimizer.errors import UsageError
from model_optimizer.events import EventCallback, QualityBaseline, QualityEval, quiet
from model_optimizer.quality.api import evaluate, load_baseline
from model_optimizer.quality.config import QualityConfig, changes_outputs, quality_config
from model_optimizer.quality.gate import GateResult
from model_optimizer.quality.result import EvalResult
from model_optimizer.recipe import LoadedRecipe

IGNORED_TOP = ("name", "description", "revision", "validated", "sweep", "tune", "quality",
               "workload", "slo")


NO_GATE_FLAG = "--no-quality-gate"


def require_gate(loaded: LoadedRecipe, fields: list[str], allow_ungated: bool,
                 what: str) -> list[str]:
    """Refuse a search that would keep an output-changing candidate without a quality gate.

    ``fields``: the dotted recipe fields the search varies (e.g. ``engine.kv_cache_dtype``).
    Returns the output-changing ones left ungated (only with ``allow_ungated``, the user's
    explicit ``--no-quality-gate``); raises UsageError (exit 2, before any launch) otherwise.
    """
    changing = changes_outputs(fields)
    problem = quality_config(loaded.resolved, loaded.base_dir).gate_problem
    if not changing or problem is None:
        return []
    if allow_ungated:
        return changing
    raise UsageError(
        f"{what} would try {', '.join(changing)}, which change the model's answers, but "
        f"{problem}: nothing would compare them with the baseline's. Set quality.eval_set "
        "(mopt:general ships with mopt; `mopt init --prompts FILE` uses your prompts) and "
        "quality.thresholds (e.g. min_top1_agreement: 0.9), or pass "
        f"{NO_GATE_FLAG} to judge them on speed alone (the report and the revision say so)")


def _flatten(value, prefix: str = "") -> dict:
    if isinstance(value, dict) and value:
        out: dict = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value} if prefix else {}


def changed_fields(base: dict, other: dict) -> list[str]:
    """Dotted fields of two resolved recipes that differ (bookkeeping and load aside)."""
    flat_a = {k: v for k, v in _flatten(base).items() if k.split(".")[0] not in IGNORED_TOP}
    flat_b = {k: v for k, v in _flatten(other).items() if k.split(".")[0] not in IGNORED_TOP}
    return sorted(k for k in set(flat_a) | set(flat_b) if flat_a.get(k) != flat_b.get(k))


class SearchGate:
    """Gate candidates of one search on quality (see the module docstring)."""

    def __init__(self, original: LoadedRecipe, runs_base: Path, *,
                 baseline_run: str | None = None, on_event: EventCallback | None = None):
        self.original = original
        self.runs_base = Path(runs_base)
        self.config: QualityConfig = quality_config(original.resolved, original.base_dir)
        self.emit = on_event or quiet
        self.baseline_run = baseline_run
        self._baseline: EvalResult | None = None

    @property
    def enabled(self) -> bool:
        """True when the recipe's quality section has something to evaluate."""
        return self.config.enabled

    def _baseline_config(self) -> dict:
        if self.config.baseline and self.config.baseline.endswith((".yaml", ".yml")):
            from model_optimizer.recipe import load_recipe

            return load_recipe(Path(self.config.baseline)).resolved
        return self.original.resolved

    def gated_fields(self, step: LoadedRecipe) -> list[str]:
        """The output-changing fields in which ``step`` differs from the baseline."""
        return changes_outputs(changed_fields(self._baseline_config(), step.resolved))

    def baseline(self) -> EvalResult:
        """The baseline's eval: read back when known, else evaluated now (once)."""
        if self._baseline is None:
            if self.baseline_run is not None:
                self._baseline = load_baseline(str(self.runs_base / self.baseline_run),
                                               self.config, self.runs_base)
            else:
                self.emit(QualityBaseline())
                reference = self.config.baseline or self.original
                self._baseline = load_baseline(reference, self.config, self.runs_base,
                                               on_event=self.emit)
                self.baseline_run = self._baseline.run_id
        return self._baseline

    def check(self, step: LoadedRecipe) -> GateResult | None:
        """The gate's verdict on ``step``; None when the recipe has no quality section. A
        step that differs from the baseline in no output-changing field passes unevaluated."""
        if not self.enabled:
            return None
        fields = self.gated_fields(step)
        if not fields:
            return GateResult(True, {"gated_fields": []},
                              ["no output-changing field differs from the baseline "
                               "(not evaluated)"], baseline_run=self.baseline_run)
        baseline = self.baseline()
        self.emit(QualityEval(list(fields)))
        outcome = evaluate(step, config=self.config, baseline=baseline,
                           runs_base=self.runs_base, on_event=self.emit)
        result = outcome.gate or GateResult(False, {}, ["no comparison with the baseline"])
        result.figures = {**result.figures, "gated_fields": fields}
        return result
