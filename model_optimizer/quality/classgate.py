"""The quality gate per eval-set class: each class's items compared and judged on their own.

The whole-set gate (:mod:`quality.gate`) already checks each class's accuracy drop; a
precision decision needs more: every threshold (exact match, top-1 agreement, KL, accuracy)
on one class's items alone, so a class whose answers drift fails even when the others hide
it in the pooled figures. :func:`gate_by_class` cuts both evals down to one class's items
(generations, teacher-forced scores) and runs the same comparison and the same thresholds
on them; items without a class take part in no class's verdict.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from model_optimizer.quality.compare import compare_evals
from model_optimizer.quality.config import Thresholds
from model_optimizer.quality.gate import GateResult, judge
from model_optimizer.quality.result import EvalResult


@dataclass(frozen=True)
class ClassGate:
    """The gate's verdict on one class's items: how many there were, and the verdict."""

    request_class: str
    items: int    # eval-set items of the class
    scored: int   # of them with a reference (they count towards task accuracy)
    gate: GateResult

    def to_dict(self) -> dict:
        """JSON form."""
        return {"class": self.request_class, "items": self.items, "scored": self.scored,
                "gate": self.gate.to_dict()}


def item_classes(result: EvalResult) -> list[str]:
    """Every class of the eval set's items (scored or not), in first-seen order."""
    return list(dict.fromkeys(i.item_class for i in result.items if i.item_class is not None))


def class_part(result: EvalResult, name: str) -> EvalResult:
    """``result`` restricted to the items of class ``name`` (lm-eval scores dropped: they
    are not per class)."""
    ids = {item.id for item in result.items if item.item_class == name}
    return replace(result, items=[i for i in result.items if i.id in ids],
                   generations=[[g for g in repeat if g.id in ids]
                                for repeat in result.generations],
                   scores=[s for s in result.scores if s.id in ids],
                   baseline_scores=[s for s in result.baseline_scores if s.id in ids],
                   lm_eval=[])


def gate_by_class(reference: EvalResult, candidate: EvalResult,
                  thresholds: Thresholds) -> dict[str, ClassGate]:
    """Each class of the reference's eval set judged on its own items: ``candidate``
    (which scored the reference's answers) against ``reference``. A candidate whose eval
    failed fails every class, with the eval's failure as the reason."""
    failure = None if candidate.ok else (candidate.failure or candidate.status)
    out = {}
    for name in item_classes(reference):
        base, cand = class_part(reference, name), class_part(candidate, name)
        comparison = compare_evals(base, cand) if failure is None else None
        if comparison is not None:
            comparison.by_class = {}  # one class: its accuracy is the comparison's own
        out[name] = ClassGate(name, len(base.items), sum(1 for i in base.items if i.scored),
                              judge(comparison, thresholds, failure))
    return out
