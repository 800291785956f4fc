"""`mopt route FLEET`: precision routing from measured quality, written as a fleet revision.

The precise instance is evaluated first (it is the reference), then the fast one against
it, each launched alone from its member recipe as the fleet serves it (its cores, its
share; the engine factory's server, stopped afterwards) or reached at a running server's
URL. Both evals are archived (kind ``eval``). The gate then judges each eval-set class on
its own items (:mod:`quality.classgate`), the rule of :mod:`quality.precision` routes each
request class of the fleet, and :mod:`fleet.revision` writes the next revision of the fleet
file: the routes' instances from the decision, the figures beside them
(``routing_evidence``). No revision is written when either eval fails.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from pathlib import Path

from model_optimizer.archive import utc_now
from model_optimizer.errors import EXIT_OK, EXIT_RUN_FAILED, EXIT_START_FAILED, UsageError
from model_optimizer.events import EventCallback, QualityBaseline, QualityEval, quiet
from model_optimizer.fleet.revision import write_routing
from model_optimizer.fleet.rules import workload_classes
from model_optimizer.fleet.spec import LoadedFleet
from model_optimizer.quality.classgate import ClassGate, gate_by_class
from model_optimizer.quality.config import QualityConfig, quality_config
from model_optimizer.quality.evaluate import EvalOutcome, run_eval
from model_optimizer.quality.precision import MIN_ITEMS, PrecisionDecision, decide
from model_optimizer.recipe.schema import fill_defaults, recipe_schema


@dataclass
class RouteOutcome:
    """Both evals, the gate per class, the decision and the revision written (or why not)."""

    fast: str
    precise: str
    reference: EvalOutcome | None = None
    candidate: EvalOutcome | None = None
    gates: dict[str, ClassGate] = field(default_factory=dict)
    decision: PrecisionDecision | None = None
    output: Path | None = None
    revision: int | None = None
    failure: str | None = None

    @property
    def start_failed(self) -> bool:
        """True when an instance's server did not start (its eval archive has failure.json)."""
        return any(o is not None and not o.result.ok and (o.result.archive / "failure.json")
                   .is_file() for o in (self.reference, self.candidate))

    @property
    def exit_code(self) -> int:
        """`mopt route`'s: 0 routed and written; 3 an instance did not start; 5 an eval
        failed (nothing written)."""
        if self.failure is None:
            return EXIT_OK
        return EXIT_START_FAILED if self.start_failed else EXIT_RUN_FAILED

    def to_dict(self) -> dict:
        """JSON form (``mopt route --json``)."""
        return {"fast": self.fast, "precise": self.precise, "failure": self.failure,
                "reference_run": _run(self.reference), "candidate_run": _run(self.candidate),
                "gates": {k: v.to_dict() for k, v in self.gates.items()},
                "decision": self.decision.to_dict() if self.decision else None,
                "output": str(self.output) if self.output else None,
                "revision": self.revision}


def _run(outcome: EvalOutcome | None) -> str | None:
    return outcome.result.run_id if outcome is not None else None


def roles(fleet: LoadedFleet, fast: str | None, precise: str | None) -> tuple[str, str]:
    """The fast and the precise instance: as named, or the other of a two-instance fleet."""
    names = list(fleet.instances)
    if fast is None and precise is not None and len(names) == 2:
        fast = next(n for n in names if n != precise)
    if precise is None and fast is not None and len(names) == 2:
        precise = next(n for n in names if n != fast)
    if fast is None or precise is None:
        raise UsageError(f"name the fast (quantized) and the precise instance: --fast NAME "
                         f"--precise NAME (instances: {', '.join(names)})")
    for role, name in (("--fast", fast), ("--precise", precise)):
        if name not in fleet.instances:
            raise UsageError(f"{role} {name}: no such instance (instances: {', '.join(names)})")
    if fast == precise:
        raise UsageError("--fast and --precise name the same instance: give two")
    return fast, precise


def fleet_quality(fleet: LoadedFleet, fast: str, eval_set: str | None) -> QualityConfig:
    """The fleet's quality section (else the fast instance's), ``eval_set`` overriding."""
    if isinstance(fleet.document.get("quality"), dict):
        section = fill_defaults(fleet.document["quality"], recipe_schema()["properties"]["quality"])
        base = fleet.path.resolve().parent if fleet.path else Path.cwd()
        config = quality_config({"quality": section}, base)
    else:
        member = fleet.instances[fast].recipe
        config = quality_config(member.resolved, member.base_dir)
    config = replace(config.with_overrides(eval_set=eval_set), baseline=None)
    if not config.eval_set:
        raise UsageError("precision routing needs an eval set whose items carry classes: "
                         "--eval-set FILE, or quality.eval_set in the fleet")
    if config.gate_problem is not None:
        raise UsageError(f"precision routing needs the gate's thresholds: {config.gate_problem}"
                         " (set quality.thresholds in the fleet)")
    return config


def fleet_classes(fleet: LoadedFleet) -> list[str]:
    """The fleet's request classes: those its routes name, then its workload's others."""
    named = [r.request_class for r in fleet.router.routes]
    return list(dict.fromkeys(named + (workload_classes(fleet.front.resolved["workload"])
                                       or [])))


def _eval(fleet: LoadedFleet, name: str, config: QualityConfig, runs_base: Path,
          url: str | None, reference: EvalOutcome | None, emit) -> EvalOutcome:
    instance = fleet.instances[name]
    return run_eval(instance.recipe, config, runs_base,
                    reference=reference.result if reference else None, url=url,
                    model=instance.served_name if url else None, on_event=emit,
                    name=f"{fleet.name}.{name}")


def route_by_precision(fleet: LoadedFleet, runs_base: Path, *, fast: str | None = None,
                       precise: str | None = None, eval_set: str | None = None,
                       urls: dict[str, str] | None = None, min_items: int = MIN_ITEMS,
                       output: Path | None = None,
                       on_event: EventCallback | None = None) -> RouteOutcome:
    """Evaluate both instances, decide per class, write the fleet's next revision."""
    emit, urls = on_event or quiet, urls or {}
    fast, precise = roles(fleet, fast, precise)
    unknown = sorted(set(urls) - set(fleet.instances))
    if unknown:
        raise UsageError(f"--url {unknown[0]}=...: no such instance")
    config = fleet_quality(fleet, fast, eval_set)
    outcome = RouteOutcome(fast, precise)
    emit(QualityBaseline())
    outcome.reference = _eval(fleet, precise, config, runs_base, urls.get(precise), None, emit)
    if not outcome.reference.result.ok:
        outcome.failure = f"the precise instance's eval failed: {outcome.reference.result.failure}"
        return outcome
    emit(QualityEval([f"instance {fast}"]))
    outcome.candidate = _eval(fleet, fast, config, runs_base, urls.get(fast),
                              outcome.reference, emit)
    if not outcome.candidate.result.ok:
        outcome.failure = f"the fast instance's eval failed: {outcome.candidate.result.failure}"
        return outcome
    outcome.gates = gate_by_class(outcome.reference.result, outcome.candidate.result,
                                  config.thresholds)
    outcome.decision = decide(outcome.gates, fleet_classes(fleet), fast, precise, min_items)
    evidence = _rounded({**outcome.decision.to_dict(), **_provenance(config, outcome)})
    outcome.output, outcome.revision, _ = write_routing(
        fleet, outcome.decision.assignment(), evidence, output)
    return outcome


def _provenance(config: QualityConfig, outcome: RouteOutcome) -> dict:
    path = Path(config.eval_set or "")
    return {"eval_set": str(path), "eval_set_sha256": hashlib.sha256(path.read_bytes())
            .hexdigest(), "thresholds": {k: v for k, v in config.thresholds.to_dict().items()
                                         if v is not None},
            "sampling": config.sampling.to_dict(), "reference_run": _run(outcome.reference),
            "candidate_run": _run(outcome.candidate), "measured_at": utc_now()}


def _rounded(value: object) -> object:
    """Floats to 6 significant digits (the file stays readable), containers recursively."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value
