"""The quality gate of `mopt optimize`: each candidate against the baseline's answers.

Uses the quality stage's public functions (:mod:`model_optimizer.quality`). The eval runs
on the server the stage's measurement launched (after its load test, as ``apply`` does), so
gating costs no launch of its own: the baseline is evaluated once (an archived ``eval`` run)
and each candidate with the same prompts and sampling, scored along the baseline's answers
and judged by the recipe's ``quality`` thresholds (per eval-set class too). A recipe that
cannot gate is refused before anything runs (:func:`quality.search_gate.require_gate`)
unless the user passed ``--no-quality-gate``; then every candidate row says, in bold, that
it was judged on speed alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from model_optimizer.events import EventCallback
from model_optimizer.recipe import LoadedRecipe

NOT_GATED = "**NOT QUALITY-GATED** (--no-quality-gate)"


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
    import model_optimizer.quality as quality

    return quality


def gate_configured(loaded: LoadedRecipe) -> str | None:
    """None when the recipe's quality section can gate; else why not, in words."""
    return _quality().quality_of(loaded).gate_problem


def require_gate(loaded: LoadedRecipe, fields: list[str], allow_ungated: bool) -> list[str]:
    """The candidates' output-changing fields left ungated (``--no-quality-gate``); raises
    UsageError (exit 2, before any launch) when the recipe cannot gate them otherwise."""
    from model_optimizer.quality.search_gate import require_gate as refuse_ungated

    return refuse_ungated(loaded, fields, allow_ungated, "mopt optimize")


class ServerEval:
    """``while_serving`` hook: evaluate ``loaded`` on the measurement's server, as the
    reference (``baseline`` None) or against the baseline's eval result."""

    def __init__(self, loaded: LoadedRecipe, runs_base: Path, baseline=None,
                 on_event: EventCallback | None = None):
        self.loaded, self.runs_base, self.baseline = loaded, runs_base, baseline
        self.on_event = on_event
        self.outcome = None

    def __call__(self, base_url: str) -> None:
        quality = _quality()
        config = quality.quality_of(self.loaded)
        if self.baseline is None:
            config = replace(config, baseline=None)  # the reference itself
        self.outcome = quality.evaluate(self.loaded, config=config, baseline=self.baseline,
                                        url=base_url, runs_base=self.runs_base,
                                        on_event=self.on_event)

    def reference(self) -> dict:
        """The baseline's gate record (its eval's figures and run id)."""
        if self.outcome is None:
            return {"gated": True, "passed": False, "reasons": ["the baseline was not "
                                                                "evaluated (it did not run)"]}
        result = self.outcome.result
        return {"gated": True, "passed": bool(result.ok), "figures": result.figures(),
                "reasons": [] if result.ok else [f"the baseline's eval failed: "
                                                 f"{result.failure}"],
                "run_id": result.run_id, "baseline": True}

    def verdict(self) -> Verdict:
        """The candidate's verdict (a candidate that was not evaluated fails)."""
        if self.outcome is None:
            return Verdict(True, False, reasons=["not evaluated: the candidate did not run"])
        gate = self.outcome.gate
        if gate is None:
            return Verdict(True, False, reasons=["no comparison with the baseline"],
                           run_id=self.outcome.result.run_id)
        return Verdict(True, bool(gate.passed), dict(gate.figures or {}),
                       list(gate.reasons or []), gate.candidate_run)


def load_baseline_eval(loaded: LoadedRecipe, run_id: str, runs_base: Path):
    """A baseline eval archived earlier (resume)."""
    quality = _quality()
    return quality.load_baseline(str(Path(runs_base) / run_id), quality.quality_of(loaded),
                                 runs_base)
