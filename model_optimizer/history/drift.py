"""Drift: a validated recipe is only validated for the vLLM and the hardware it was measured on.

``mopt apply`` compares the installed vLLM version and the hardware this process sees with
the recipe's ``validated`` block and warns when they differ; with ``--strict`` the
difference is an error and nothing is launched. A recipe without a ``validated`` block, or a
block without the figure in question, has nothing to drift from.

A revision whose ``model.pins`` name a checkpoint hash (written by `mopt quantize` and
`mopt optimize`) is also checked against the model folder on disk: a changed, added or
missing weight or config file is drift too, named file by file.
"""

from __future__ import annotations

from pathlib import Path

from model_optimizer.archive.versions import vllm_version
from model_optimizer.errors import UsageError
from model_optimizer.models.pins import pin_messages
from model_optimizer.recipe.render import model_location
from model_optimizer.telemetry import this_hardware


class DriftError(UsageError):
    """``--strict`` and the recipe was validated on another vLLM or other hardware."""


def current_hardware() -> str:
    """The hardware label this process sees (the same words a search records)."""
    return this_hardware()


def drift_messages(resolved: dict, installed_vllm: str | None,
                   hardware: str | None) -> list[str]:
    """Each way the machine differs from the recipe's ``validated`` block, in words."""
    validated = resolved.get("validated") or {}
    if not validated:
        return []
    where = (f"recipe {resolved.get('name')} revision {resolved.get('revision')} was "
             f"validated (run {validated.get('run_id')})")
    messages = []
    expected_vllm = validated.get("vllm_version")
    if expected_vllm and expected_vllm != installed_vllm:
        messages.append(f"{where} with vLLM {expected_vllm}; installed here: "
                        f"{installed_vllm or 'none'}")
    expected_hw = validated.get("hardware")
    if expected_hw and hardware and expected_hw != hardware:
        messages.append(f"{where} on {expected_hw}; this machine: {hardware}")
    return messages


def pinned_checkpoint_messages(resolved: dict, base_dir: Path | None) -> list[str]:
    """How the model folder differs from ``model.pins`` (empty without pins)."""
    pins = (resolved.get("model") or {}).get("pins")
    if not pins:
        return []
    return pin_messages(pins, Path(model_location(resolved, base_dir)))


def check_drift(resolved: dict, strict: bool = False, base_dir: Path | None = None
                ) -> list[str]:
    """Drift messages for ``resolved`` on this machine (and its pinned checkpoint, when
    ``base_dir``, the recipe's folder, is given); raise DriftError when ``strict``."""
    messages = pinned_checkpoint_messages(resolved, base_dir) if base_dir is not None else []
    if resolved.get("validated"):
        messages += drift_messages(resolved, vllm_version(), current_hardware())
    if messages and strict:
        raise DriftError("; ".join(messages) + ". Refusing to run with --strict: re-validate "
                         "the recipe here (mopt sweep, mopt optimize), or run without "
                         "--strict.")
    return messages
