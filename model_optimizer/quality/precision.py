"""Precision routing: which request class the fast (quantized) instance may serve, from the
quality gate per class against the precise instance. Pure: figures in, a decision out.

The rule, per request class of the fleet:

- the gate passed on the fast instance (every threshold held on the class's own items,
  against the precise instance's answers): the class goes to the **fast** instance;
- the gate failed: the class goes to the **precise** instance, the failed checks as reason;
- fewer than ``min_items`` eval items of the class, or none: the class is not judged and
  goes to the **precise** instance (conservative: a handful of answers cannot show that the
  fast one is good enough), the count as reason.

Eval-set classes the fleet does not have are reported and take no part. The decision keeps
every figure the verdict rests on (``to_dict``: the ``routing_evidence`` block of the fleet
revision), so the routing table can be traced to the measurement, never to a hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from model_optimizer.quality.classgate import ClassGate

#: the verdicts of one class
PASSED, FAILED, TOO_FEW = "passed", "failed", "too_few_items"

#: default minimum eval items of a class to judge it (the shipped set has 8 per class)
MIN_ITEMS = 8

_FIGURES = ("accuracy", "baseline_accuracy", "accuracy_drop", "accuracy_noise",
            "exact_match_rate", "top1_agreement", "mean_kl", "max_kl", "prompts")


@dataclass(frozen=True)
class ClassRouting:
    """Where one request class goes, why, and the figures behind it."""

    request_class: str
    to: str
    verdict: str        # passed, failed or too_few_items
    reason: str
    items: int = 0
    scored: int = 0
    figures: dict = field(default_factory=dict)   # the fast instance against the precise
    checks: tuple[dict, ...] = ()                 # each threshold: value, passed

    def to_dict(self) -> dict:
        """JSON form (one class of ``routing_evidence.classes``)."""
        return {"to": self.to, "verdict": self.verdict, "reason": self.reason,
                "items": self.items, "scored": self.scored, "figures": self.figures,
                "checks": list(self.checks)}


@dataclass(frozen=True)
class PrecisionDecision:
    """The routing of every class of the fleet between the fast and the precise instance."""

    fast: str
    precise: str
    min_items: int
    classes: tuple[ClassRouting, ...]
    ignored: tuple[str, ...] = ()   # eval-set classes the fleet does not have

    def assignment(self) -> dict[str, str]:
        """Class -> instance."""
        return {c.request_class: c.to for c in self.classes}

    def to_dict(self) -> dict:
        """JSON form: the figures beside the routing table."""
        return {"fast": self.fast, "precise": self.precise, "min_items": self.min_items,
                "classes": {c.request_class: c.to_dict() for c in self.classes},
                "ignored_eval_classes": list(self.ignored)}


def _figures(found: ClassGate) -> tuple[dict, tuple[dict, ...]]:
    gate = found.gate
    figures = {key: gate.figures[key] for key in _FIGURES if gate.figures.get(key) is not None}
    checks = tuple({"name": c.name, "threshold": c.threshold, "value": c.value,
                    "passed": c.passed} for c in gate.checks)
    return figures, checks


def route_class(name: str, found: ClassGate | None, fast: str, precise: str,
                min_items: int) -> ClassRouting:
    """One class's routing by the rule in the module's docstring."""
    if found is None:
        return ClassRouting(name, precise, TOO_FEW, f"the eval set has no item of class "
                            f"'{name}': not judged, served by the precise instance")
    figures, checks = _figures(found)
    counts = {"items": found.items, "scored": found.scored, "figures": figures,
              "checks": checks}
    if found.items < min_items:
        return ClassRouting(name, precise, TOO_FEW, f"{found.items} eval item(s) of class "
                            f"'{name}', fewer than the {min_items} needed to judge it: "
                            "served by the precise instance", **counts)
    if not found.gate.passed:
        return ClassRouting(name, precise, FAILED, "quality gate failed on the fast instance: "
                            + "; ".join(found.gate.reasons), **counts)
    return ClassRouting(name, fast, PASSED, "quality gate passed on the fast instance: "
                        + "; ".join(found.gate.reasons), **counts)


def decide(gates: dict[str, ClassGate], classes: Sequence[str], fast: str, precise: str,
           min_items: int = MIN_ITEMS) -> PrecisionDecision:
    """Route each of the fleet's ``classes`` to ``fast`` or ``precise`` from ``gates`` (the
    gate per eval-set class, the fast instance against the precise one)."""
    if fast == precise:
        raise ValueError("the fast and the precise instance must differ")
    routed = tuple(route_class(name, gates.get(name), fast, precise, min_items)
                   for name in classes)
    ignored = tuple(name for name in gates if name not in classes)
    return PrecisionDecision(fast, precise, min_items, routed, ignored)
