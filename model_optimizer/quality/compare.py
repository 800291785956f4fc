"""Compare a candidate's eval with its baseline's: fidelity, task accuracy, lm-eval scores.

Fidelity (:mod:`quality.fidelity`) uses the first repeat (the recorded seed): its
generations, and the teacher-forced distributions of both deployments along the baseline's
answers. Exact match is also given per repeat. Task accuracy (overall and per eval-set
class) is judged against the spread of the repeats
(:func:`quality.scoring.compare_accuracy`); an lm-eval task's difference against its
reported standard errors (beyond noise when the drop exceeds 1.96 times the combined
standard error).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from model_optimizer.quality.fidelity import FidelitySummary, PromptFidelity, compare
from model_optimizer.quality.result import EvalResult
from model_optimizer.quality.scoring import AccuracyComparison, compare_accuracy

Z_95 = 1.96


@dataclass
class Comparison:
    """Everything measured about a candidate relative to a baseline."""

    baseline_run: str
    candidate_run: str
    prompts: list[PromptFidelity] = field(default_factory=list)
    fidelity: FidelitySummary | None = None
    exact_match_per_repeat: list[float] = field(default_factory=list)
    accuracy: AccuracyComparison | None = None
    lm_eval: list[dict] = field(default_factory=list)
    by_class: dict[str, AccuracyComparison] = field(default_factory=dict)

    def figures(self) -> dict:
        """Flat figures for tables, the validated block and ``mopt diff``."""
        out: dict = {}
        if self.fidelity is not None:
            f = self.fidelity
            out.update(exact_match_rate=f.exact_match_rate,
                       mean_first_divergence=f.mean_first_divergence, diverged=f.diverged,
                       top1_agreement=f.top1_agreement, mean_kl=f.mean_kl, max_kl=f.max_kl,
                       positions=f.positions, prompts=f.prompts)
        if self.accuracy is not None:
            out.update(baseline_accuracy=self.accuracy.baseline_mean,
                       accuracy=self.accuracy.candidate_mean,
                       accuracy_drop=self.accuracy.drop, accuracy_noise=self.accuracy.noise)
        for name, acc in self.by_class.items():
            out.update({f"baseline_accuracy.{name}": acc.baseline_mean,
                        f"accuracy.{name}": acc.candidate_mean,
                        f"accuracy_drop.{name}": acc.drop})
        for task in self.lm_eval:
            out[f"lm_eval.{task['task']}"] = task["candidate"]
            out[f"lm_eval.{task['task']}.drop"] = task["drop"]
        return out

    def to_dict(self) -> dict:
        """JSON form (``quality.json``'s ``comparison``)."""
        return {"baseline_run": self.baseline_run, "candidate_run": self.candidate_run,
                "fidelity": self.fidelity.to_dict() if self.fidelity else None,
                "exact_match_per_repeat": self.exact_match_per_repeat,
                "accuracy": self.accuracy.to_dict() if self.accuracy else None,
                "by_class": {k: v.to_dict() for k, v in self.by_class.items()},
                "lm_eval": self.lm_eval, "figures": self.figures()}


def _lm_eval_deltas(base: EvalResult, cand: EvalResult) -> list[dict]:
    by_task = {s.task: s for s in base.lm_eval}
    out = []
    for score in cand.lm_eval:
        ref = by_task.get(score.task)
        if ref is None:
            continue
        drop = ref.value - score.value
        combined = math.sqrt((ref.stderr or 0.0) ** 2 + (score.stderr or 0.0) ** 2)
        out.append({"task": score.task, "metric": score.metric, "baseline": ref.value,
                    "candidate": score.value, "drop": drop, "noise": Z_95 * combined,
                    "beyond_noise": abs(drop) > Z_95 * combined})
    return out


def _exact_rate(base: list, cand: list) -> float:
    by_id = {g.id: g for g in cand}
    pairs = [(b, by_id[b.id]) for b in base if b.id in by_id]
    if not pairs:
        return 0.0
    return sum(1 for b, c in pairs if b.ok and c.ok and b.token_ids == c.token_ids
               and b.text == c.text) / len(pairs)


def compare_evals(base: EvalResult, cand: EvalResult) -> Comparison:
    """The comparison of ``cand`` (which scored the baseline's answers) with ``base``."""
    result = Comparison(base.run_id, cand.run_id)
    if base.generations and cand.generations:
        result.prompts, result.fidelity = compare(base.generations[0], cand.generations[0],
                                                  base.scores, cand.baseline_scores)
        result.exact_match_per_repeat = [
            _exact_rate(b, c) for b, c in zip(base.generations, cand.generations, strict=False)]
    result.accuracy = compare_accuracy(base.accuracy(), cand.accuracy())
    for name in base.classes():
        if (found := compare_accuracy(base.accuracy(name), cand.accuracy(name))) is not None:
            result.by_class[name] = found
    result.lm_eval = _lm_eval_deltas(base, cand)
    return result
