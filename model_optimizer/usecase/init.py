"""``mopt init MODEL_DIR`` below the command line: the hardware to plan for, the request
lengths (from a prompt file, or given), the commented recipe built and checked with the
planner, then written with its quality files (``onboard/``). ``mopt optimize MODEL_DIR``
writes its recipe with it too.

    result = init(Path("models/tiny-llama"), output=Path("recipes/tiny.yaml"))
    result.recipe, result.plan
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from model_optimizer.errors import EXIT_OK, UsageError
from model_optimizer.fsutil import atomic_write_text
from model_optimizer.onboard.detect import SeenHardware, known_accelerators, seen_hardware
from model_optimizer.onboard.init import WorkloadChoice, build_init_recipe, with_prompt_file
from model_optimizer.onboard.quality import write_quality_files
from model_optimizer.plan.accelerators import canonical_accelerator


@dataclass(frozen=True)
class InitResult:
    """The recipe written (``recipe``, ``name``), the planner's verdict on it (``plan``),
    each value chosen and why (``choices``, with ``problems``), the hardware planned for,
    and what the user must know about the request lengths (``warnings``)."""

    recipe: Path
    name: str
    plan: str
    choices: dict[str, Any]
    hardware: SeenHardware
    warnings: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0: every refusal raises UsageError (2) instead."""
        return EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        """``mopt init --json``."""
        return {"ok": True, "recipe": str(self.recipe), "name": self.name, "plan": self.plan,
                "choices": self.choices, "warnings": self.warnings}


def hardware(accelerator: str | None = None, memory_gib: float | None = None,
             count: int | None = None) -> SeenHardware:
    """The hardware to plan for: this machine's (NVML, else cpu), or the ``accelerator``
    named (any case, aliases; UsageError with a did-you-mean for an unknown one), with
    ``memory_gib`` per device and ``count`` devices in place of the table's."""
    seen = seen_hardware()
    if accelerator is not None and accelerator not in known_accelerators():
        accelerator = canonical_accelerator(accelerator)  # case, aliases; else did-you-mean
    if accelerator is None or accelerator == seen.accelerator:
        hw = seen
    else:
        hw = SeenHardware(accelerator, 1, None, f"{accelerator} (named, not seen here)")
    if memory_gib is not None:
        hw = SeenHardware(hw.accelerator, hw.count, memory_gib, hw.description)
    if count is not None:
        hw = SeenHardware(hw.accelerator, count, hw.memory_gib, hw.description)
    return hw


def init(model_dir: Path, *, output: Path | None = None, name: str | None = None,
         accelerator: str | None = None, memory_gib: float | None = None,
         count: int | None = None, prompts: Path | None = None, prompt_tokens: int = 512,
         output_tokens: int = 128, force: bool = False) -> InitResult:
    """Write a starting recipe for ``model_dir`` at ``output`` (default
    ``recipes/<name or folder name>.yaml``): the hardware's (:func:`hardware`) planned
    max_num_seqs and memory, a workload of ``prompt_tokens`` and ``output_tokens`` (with
    ``prompts``, a JSONL prompt file: its median length, its first prompts the eval set,
    the rest the calibration set), each value explained.

    UsageError (exit 2, nothing written) for a folder that is not there or has no usable
    config.json, an unknown accelerator, a bad prompt file, or ``output`` existing
    without ``force``."""
    if not model_dir.is_dir():
        raise UsageError(f"{model_dir}: not a folder (give the model folder with config.json)")
    target = output or Path("recipes") / f"{(name or model_dir.resolve().name)}.yaml"
    if target.exists() and not force:
        raise UsageError(f"{target}: exists; pass --force to overwrite or --output FILE")
    work = WorkloadChoice(prompt_tokens, output_tokens)
    if prompts is not None:
        work = with_prompt_file(work, prompts, model_dir)
    hw = hardware(accelerator, memory_gib, count)
    result = build_init_recipe(model_dir, target, hw, work, name)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, result.text)
    write_quality_files(result.files, target)
    return InitResult(target, result.name, result.plan_verdict, result.choices, hw,
                      [work.warning] if work.warning else [])
