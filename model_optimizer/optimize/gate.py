"""The quality gate of `mopt optimize`: each candidate against the baseline's answers.

Uses the quality stage's public functions (:mod:`model_optimizer.quality`): the baseline is
evaluated once (an archived ``eval`` run), each candidate is evaluated with the same
prompts and sampling and judged by the recipe's ``quality`` thresholds. A recipe without a
``quality`` section (or with nothing to evaluate) is not gated: the report says so on every
candidate row, and the candidate is judged on speed alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from model_optimizer.recipe import LoadedRecipe

Event = Callable[[str, dict], None]


@dataclass
class Verdict:
    """A candidate's gate outcome, in the form the pipeline archives."""

    gated: bool
    passed: bool
    figures: dict = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    run_id: str | None = None

    def to_dict(self) -> dict:
        """JSON form."""
        return {"gated": self.gated, "passed": self.passed, "figures": self.figures,
                "reasons": self.reasons, "run_id": self.run_id}

    @classmethod
    def from_dict(cls, data: dict) -> Verdict:
        """Inverse of :meth:`to_dict`."""
        return cls(**data)


def _quality():
    try:
        import model_optimizer.quality as quality
    except ImportError:
        return None
    return quality


def gate_configured(loaded: LoadedRecipe) -> str | None:
    """None when the recipe's quality section can gate; else why not, in words."""
    quality = _quality()
    if quality is None:
        return "this mopt has no quality stage"
    if not loaded.resolved.get("quality"):
        return "the recipe has no quality section"
    if not quality.quality_of(loaded).enabled:
        return "the quality section names no eval set or task"
    return None


def evaluate_baseline(loaded: LoadedRecipe, runs_base: Path, on_event: Event | None = None):
    """The baseline's eval result (launched and archived under ``runs_base``)."""
    quality = _quality()
    config = replace(quality.quality_of(loaded), baseline=None)  # the reference itself
    outcome = quality.evaluate(loaded, config=config, runs_base=runs_base, on_event=on_event)
    return outcome.result


def load_baseline_eval(loaded: LoadedRecipe, run_id: str, runs_base: Path):
    """A baseline eval archived earlier (resume)."""
    quality = _quality()
    return quality.load_baseline(run_id, quality.quality_of(loaded), runs_base)


def gate(candidate: LoadedRecipe, baseline_result, runs_base: Path,
         on_event: Event | None = None) -> Verdict:
    """Evaluate ``candidate`` against the baseline's eval and apply the thresholds."""
    quality = _quality()
    result = quality.gate(candidate, baseline_result, config=quality.quality_of(candidate),
                          runs_base=runs_base, on_event=on_event)
    return Verdict(True, bool(result.passed), dict(result.figures or {}),
                   list(result.reasons or []), result.candidate_run)
