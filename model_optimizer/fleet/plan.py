"""``mopt plan FLEET``: each instance planned for its own classes, and the shared verdict.

Each instance is planned by ``plan.estimate`` as its member recipe is served: its share of
the accelerator (GPU: ``gpu_memory_utilization``; CPU: ``VLLM_CPU_KVCACHE_SPACE``), its own
knobs, and the workload restricted to the classes the routes send it (a mix is planned at
its mean request). An instance *fits* when nothing stops vLLM from starting in its share
(weights + the activation reserve + at least one request's KV) and its KV cache holds
``max_num_seqs`` sequences of its workload's length without preemption; the fleet fits when
every instance does and the shares add up to what the accelerator has.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from model_optimizer.errors import UsageError
from model_optimizer.fleet.spec import Instance, LoadedFleet
from model_optimizer.plan import PlanReport, estimate, load_model_config
from model_optimizer.plan.checkpoint_files import read_checkpoint
from model_optimizer.recipe.render import model_location

GIB = 1024**3


@dataclass(frozen=True)
class InstancePlan:
    """One instance's plan and its own verdict."""

    name: str
    classes: tuple[str, ...]
    report: PlanReport
    model_config: str

    @property
    def holds_max_num_seqs(self) -> bool:
        """True when the KV cache holds ``max_num_seqs`` sequences without preemption."""
        return self.report.max_seqs_no_preemption >= self.report.recipe_max_num_seqs

    @property
    def fits(self) -> bool:
        """Starts in its share and holds its batch."""
        return self.report.fits and self.holds_max_num_seqs

    @property
    def used_bytes(self) -> int:
        """Weights + activation reserve + KV budget: what the instance takes of the device."""
        return (self.report.weight_bytes_per_device + self.report.reserve_bytes_per_device
                + max(0, self.report.kv_budget_bytes))

    def reasons(self) -> list[str]:
        """Why it does not fit (empty when it does)."""
        out = list(self.report.problems)
        if self.report.fits and not self.holds_max_num_seqs:
            r = self.report
            out.append(f"its KV cache holds {r.max_seqs_no_preemption} sequences of "
                       f"{r.seq_len} tokens, fewer than max_num_seqs {r.recipe_max_num_seqs}")
        return out

    def to_dict(self) -> dict:
        """JSON-ready, with the plan report."""
        return {"name": self.name, "classes": list(self.classes), "fits": self.fits,
                "reasons": self.reasons(), "used_bytes": self.used_bytes,
                "model_config": self.model_config, "plan": self.report.to_dict()}


@dataclass
class FleetPlan:
    """Every instance's plan and the verdict for the shared accelerator."""

    accelerator: str
    memory_gib: float
    instances: list[InstancePlan]
    problems: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        """Every instance fits and together they fit the accelerator."""
        return not self.problems and all(i.fits for i in self.instances)

    @property
    def used_bytes(self) -> int:
        """What the instances take together."""
        return sum(i.used_bytes for i in self.instances)

    def verdict(self) -> str:
        """One line: fits (with each instance's sequences), or does not fit and why."""
        if self.fits:
            held = ", ".join(f"{i.name} {i.report.max_seqs_no_preemption} of "
                             f"{i.report.seq_len} tokens (max_num_seqs "
                             f"{i.report.recipe_max_num_seqs})" for i in self.instances)
            return f"fits: sequences held without preemption: {held}"
        why = list(self.problems) + [f"{i.name}: {reason}" for i in self.instances
                                     for reason in i.reasons()]
        return "does not fit: " + "; ".join(why)

    def to_dict(self) -> dict:
        """JSON-ready."""
        return {"accelerator": self.accelerator, "memory_gib": self.memory_gib,
                "fits": self.fits, "verdict": self.verdict(), "used_bytes": self.used_bytes,
                "problems": self.problems, "instances": [i.to_dict() for i in self.instances]}


def instance_config(instance: Instance, explicit: Path | None) -> Path:
    """The instance's model config: its model folder's config.json, else ``explicit``."""
    location = Path(model_location(instance.recipe.spec, instance.recipe.base_dir))
    if (location / "config.json").is_file():
        return location / "config.json"
    if explicit is not None:
        return explicit
    raise UsageError(f"instance '{instance.name}': model.path "
                     f"'{instance.recipe.spec.model.path}' has no config.json on this machine; "
                     "pass the model's config with --model-config FILE (used for every "
                     "instance whose model folder is not here)")


def plan_fleet(fleet: LoadedFleet, model_config: Path | None = None) -> FleetPlan:
    """Plan every instance of ``fleet`` and the shared accelerator."""
    plans = []
    for instance in fleet.instances.values():
        path = instance_config(instance, model_config)
        folder = path.parent if path.name == "config.json" else None
        report = estimate(instance.recipe.resolved, load_model_config(path),
                          read_checkpoint(folder) if folder else None)
        plans.append(InstancePlan(instance.name, instance.classes, report, str(path)))
    first = plans[0].report
    out = FleetPlan(first.accelerator, first.memory_gib, plans)
    if first.gpu_memory_utilization is None:  # cpu: weights and KV spaces in host memory
        total = out.used_bytes
        if total > first.memory_gib * GIB:
            out.problems.append(f"the instances take {total / GIB:.2f} GiB together (weights "
                                f"and KV space), more than hardware.memory_gib "
                                f"{first.memory_gib:g}")
    return out
