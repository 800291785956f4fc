"""The quality gate's verdict: thresholds applied to a comparison, with the reasons in words.

Checks (each only when its threshold is set in ``quality.thresholds``):

- ``min_exact_match``: share of prompts whose generation equals the baseline's.
- ``min_top1_agreement``: teacher-forced top-1 agreement, pooled over positions.
- ``max_mean_kl``: mean KL(baseline || candidate) in nats per position.
- ``max_accuracy_drop``: task accuracy drop (baseline minus candidate, as a fraction: 0.02 =
  2 points), for the eval set's scored items, each of their classes and each lm-eval task;
  a drop fails only when it is also beyond noise (the spread of the repeats, see
  :mod:`quality.scoring`; lm-eval's standard errors), so one unlucky run never fails a
  candidate.

A candidate whose eval failed (the server did not start, requests failed) fails the gate; so
does a threshold whose figure could not be measured.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from model_optimizer.quality.compare import Comparison
from model_optimizer.quality.config import Thresholds


@dataclass
class Check:
    """One threshold compared with its measured figure."""

    name: str
    threshold: float
    value: float | None
    passed: bool
    reason: str

    def to_dict(self) -> dict:
        """JSON form."""
        return {"name": self.name, "threshold": self.threshold, "value": self.value,
                "passed": self.passed, "reason": self.reason}


@dataclass
class GateResult:
    """The gate's answer for one candidate: passed, the figures, and why (in words)."""

    passed: bool
    figures: dict = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    baseline_run: str | None = None
    candidate_run: str | None = None

    def to_dict(self) -> dict:
        """JSON form (``quality.json``'s ``gate``; sweep and tune archives)."""
        return {"passed": self.passed, "figures": self.figures, "reasons": self.reasons,
                "checks": [c.to_dict() for c in self.checks],
                "baseline_run": self.baseline_run, "candidate_run": self.candidate_run}

    @property
    def summary(self) -> str:
        """One line: passed, or the failed checks."""
        if self.passed:
            return "quality gate passed" + (f" ({'; '.join(self.reasons)})"
                                            if self.reasons else "")
        return "quality gate failed: " + "; ".join(self.reasons)


def _fmt(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.4g}"


def _minimum(name: str, value: float | None, threshold: float, what: str) -> Check:
    passed = value is not None and value >= threshold
    relation = "at least" if passed else "below"
    return Check(name, threshold, value, passed,
                 f"{what} {_fmt(value)} {relation} the minimum {threshold:g}"
                 if value is not None else f"{what} not measured (needs {name})")


def _maximum(name: str, value: float | None, threshold: float, what: str) -> Check:
    passed = value is not None and value <= threshold
    relation = "within" if passed else "above"
    return Check(name, threshold, value, passed,
                 f"{what} {_fmt(value)} {relation} the maximum {threshold:g}"
                 if value is not None else f"{what} not measured (needs {name})")


def _accuracy_checks(comparison: Comparison, limit: float) -> list[Check]:
    checks = []
    acc = comparison.accuracy
    if acc is not None:
        failed = acc.drop > limit and acc.beyond_noise
        noise = "beyond" if acc.beyond_noise else "within"
        checks.append(Check("max_accuracy_drop", limit, acc.drop, not failed,
                            f"accuracy {acc.baseline_mean:.3f} -> {acc.candidate_mean:.3f} "
                            f"(drop {acc.drop:+.3f}, {noise} the noise of "
                            f"{acc.noise:.3f}; limit {limit:g})"))
    for name, per in comparison.by_class.items():
        failed = per.drop > limit and per.beyond_noise
        checks.append(Check(f"max_accuracy_drop[class {name}]", limit, per.drop, not failed,
                            f"class {name} accuracy {per.baseline_mean:.3f} -> "
                            f"{per.candidate_mean:.3f} (drop {per.drop:+.3f}; limit {limit:g})"))
    for task in comparison.lm_eval:
        failed = task["drop"] > limit and task["beyond_noise"]
        checks.append(Check(f"max_accuracy_drop[{task['task']}]", limit, task["drop"],
                            not failed,
                            f"lm-eval {task['task']} {task['metric']} {task['baseline']:.3f} "
                            f"-> {task['candidate']:.3f} (drop {task['drop']:+.3f}, noise "
                            f"{task['noise']:.3f}; limit {limit:g})"))
    if not checks:
        checks.append(Check("max_accuracy_drop", limit, None, False,
                            "accuracy not measured: no scored eval-set items or lm-eval tasks"))
    return checks


def judge(comparison: Comparison | None, thresholds: Thresholds,
          failure: str | None = None) -> GateResult:
    """Apply ``thresholds`` to ``comparison``; ``failure`` says why an eval did not finish."""
    if failure is not None or comparison is None:
        why = failure or "no comparison with a baseline"
        return GateResult(False, {}, [f"eval failed: {why}"])
    figures = comparison.figures()
    checks: list[Check] = []
    if thresholds.min_exact_match is not None:
        checks.append(_minimum("min_exact_match", figures.get("exact_match_rate"),
                               thresholds.min_exact_match, "exact match rate"))
    if thresholds.min_top1_agreement is not None:
        checks.append(_minimum("min_top1_agreement", figures.get("top1_agreement"),
                               thresholds.min_top1_agreement, "top-1 agreement"))
    if thresholds.max_mean_kl is not None:
        checks.append(_maximum("max_mean_kl", figures.get("mean_kl"), thresholds.max_mean_kl,
                               "mean KL"))
    if thresholds.max_accuracy_drop is not None:
        checks.extend(_accuracy_checks(comparison, thresholds.max_accuracy_drop))
    failed = [c for c in checks if not c.passed]
    reasons = [c.reason for c in (failed or checks)]
    return GateResult(not failed, figures, reasons, checks, comparison.baseline_run,
                      comparison.candidate_run)
