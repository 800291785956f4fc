"""The candidates `mopt optimize` tries, from the recipe's ``optimize`` section.

A candidate is a name, an optional partial ``quantize`` section (merged over the recipe's)
and an optional ``kv_cache_dtype``. Each becomes typed values set on the recipe
(``LoadedRecipe.varied``), so it is validated by the same schema and rules as a file; the
planner then says whether it can run on the recipe's hardware (a GPU-only scheme or KV
dtype on CPU is skipped with the reason), and, for a CPU recipe (served on this machine),
whether this CPU's instruction set can: an fp8 KV cache or W4A16 weights without AVX-512 are
skipped before anything is quantized or launched.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from model_optimizer.plan.kvcache import cpu_kv_dtype_problem, kv_dtype_verdict
from model_optimizer.plan.quant_schemes import cpu_isa_problem, gpu_only_problem
from model_optimizer.telemetry import cpu_flags


@dataclass(frozen=True)
class Candidate:
    """One thing to try against the baseline."""

    name: str
    quantize: dict = field(default_factory=dict)
    kv_cache_dtype: str | None = None

    @property
    def quantizes(self) -> bool:
        """True when the candidate needs a quantized checkpoint."""
        return bool(self.quantize)

    def describe(self) -> str:
        """A few words for tables: 'w4a16 weights, fp8 KV'."""
        parts = []
        if self.quantize:
            parts.append(f"{self.quantize.get('scheme', 'w4a16')} weights")
        if self.kv_cache_dtype:
            parts.append(f"{self.kv_cache_dtype} KV")
        return ", ".join(parts) or "as the baseline"

    @property
    def source(self) -> str:
        """Where its values come from, as diagnostics and archives name it."""
        return f"optimize candidate {self.name}"

    def quantize_values(self) -> dict[str, object]:
        """Its ``quantize.*`` values (nested keys flattened to dotted paths, so they merge
        over the recipe's section)."""
        return _flatten(self.quantize, "quantize.")

    def engine_values(self) -> dict[str, object]:
        """Its ``engine.*`` values."""
        return {"engine.kv_cache_dtype": self.kv_cache_dtype} if self.kv_cache_dtype else {}


def checkpoint_values(made: dict) -> dict[str, object]:
    """The model values that serve a checkpoint the candidate made (``made``: its folder
    and weight bits, as the optimize state records them)."""
    return {"model.path": made["folder"], "model.quantization": "compressed-tensors",
            "model.weight_bits": made["weight_bits"]}


def _flatten(data: dict, prefix: str = "") -> dict[str, object]:
    flat: dict[str, object] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(_flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def candidates_of(resolved: dict) -> list[Candidate]:
    """The recipe's candidates, in order."""
    return [Candidate(item["name"], dict(item.get("quantize") or {}), item.get("kv_cache_dtype"))
            for item in resolved["optimize"]["candidates"]]


def cannot_run(candidate: Candidate, resolved: dict,
               flags: frozenset[str] | None = None) -> str | None:
    """Why the recipe's hardware cannot serve this candidate (GPU-only), or, for a CPU
    recipe, why this CPU cannot (``flags``: its /proc/cpuinfo flags, read when None)."""
    on_cpu = resolved["hardware"]["accelerator"] == "cpu"
    flags = (cpu_flags() if flags is None else flags) if on_cpu else frozenset()
    if candidate.quantizes:
        scheme = candidate.quantize.get("scheme", resolved["quantize"]["scheme"])
        if problem := gpu_only_problem(scheme, on_cpu) or cpu_isa_problem(scheme, flags):
            return problem
    if candidate.kv_cache_dtype:
        problem, _note = kv_dtype_verdict(candidate.kv_cache_dtype, on_cpu)
        return problem or cpu_kv_dtype_problem(candidate.kv_cache_dtype, flags)
    return None
