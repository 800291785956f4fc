"""Drift: a validated recipe is only validated for the vLLM and the hardware it was measured on.

``mopt apply`` compares the installed vLLM version and the hardware this process sees with
the recipe's ``validated`` block and warns when they differ; with ``--strict`` the
difference is an error and nothing is launched. A recipe without a ``validated`` block, or a
block without the figure in question, has nothing to drift from.

A revision whose ``model.pins`` name a checkpoint hash (written by `mopt quantize` and
`mopt optimize`) is also checked against the model folder on disk: a changed, added or
missing weight or config file is drift too, named file by file; a hub id's pinned commit
(``model.pins.commit``) is compared with the commit its branch names in the local Hugging
Face cache now. A block that records the
GPU driver (``validated.driver``) is checked against this machine's.

Drift says the figures were measured elsewhere, not that they no longer hold: ``mopt
verify`` re-measures the revision here and archives its verdict. Once the latest
verification of this revision in this environment held (:mod:`.verifications`),
``--strict`` accepts it, and the messages say so.
"""

from __future__ import annotations

from pathlib import Path

from model_optimizer.archive.versions import vllm_version
from model_optimizer.errors import UsageError
from model_optimizer.history.verifications import latest_here
from model_optimizer.models.pins import checkpoint_hash, hub_pin_messages, pin_messages
from model_optimizer.recipe.render import model_location
from model_optimizer.telemetry import this_hardware


class DriftError(UsageError):
    """``--strict`` and the recipe was validated on another vLLM or other hardware."""


def current_hardware() -> str:
    """The hardware label this process sees (the same words a search records)."""
    return this_hardware()


def current_driver() -> str | None:
    """The NVIDIA driver version this process sees (None without NVML)."""
    from model_optimizer.telemetry import NvmlProbe

    probe = NvmlProbe()
    try:
        return probe.driver_version()
    finally:
        probe.close()


def checkpoint_here(resolved: dict, base_dir: Path | None) -> str | None:
    """The SHA-256 of the model folder when the revision pins one (None otherwise, or when
    it cannot be hashed)."""
    if not ((resolved.get("model") or {}).get("pins") or {}).get("sha256"):
        return None
    try:
        return checkpoint_hash(model_location(resolved, base_dir)).sha256
    except (OSError, ValueError):
        return None


def environment_here(resolved: dict, base_dir: Path | None) -> dict:
    """What a measurement of ``resolved`` here depends on beyond the recipe: the installed
    vLLM, this machine's hardware label and GPU driver and, when the revision pins its
    checkpoint, the SHA-256 of the model folder on disk (the keys of a verification's
    environment, :data:`.verifications.ENVIRONMENT_KEYS`)."""
    return {"vllm": vllm_version(), "hardware": current_hardware(),
            "driver": current_driver(), "checkpoint": checkpoint_here(resolved, base_dir)}


def drift_messages(resolved: dict, installed_vllm: str | None,
                   hardware: str | None, driver: str | None = None) -> list[str]:
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
    expected_driver = validated.get("driver")
    if expected_driver and expected_driver != driver:
        messages.append(f"{where} with GPU driver {expected_driver}; this machine: "
                        f"{driver or 'none'}")
    return messages


def pinned_checkpoint_messages(resolved: dict, base_dir: Path | None) -> list[str]:
    """How the model folder differs from ``model.pins`` (empty without pins)."""
    model = resolved.get("model") or {}
    pins = model.get("pins")
    if not pins:
        return []
    location = Path(model_location(resolved, base_dir))
    if not location.is_absolute():  # a hub id: the commit measured
        return hub_pin_messages(pins, model["path"], model.get("revision"))
    return pin_messages(pins, location)


def check_drift(resolved: dict, strict: bool = False, base_dir: Path | None = None,
                runs_base: Path | None = None) -> list[str]:
    """Drift messages for ``resolved`` on this machine (and its pinned checkpoint, when
    ``base_dir``, the recipe's folder, is given); raise DriftError when ``strict``, unless
    the latest verification of this revision here (under ``runs_base``) held."""
    messages = pinned_checkpoint_messages(resolved, base_dir) if base_dir is not None else []
    environment = environment_here(resolved, base_dir) if resolved.get("validated") else {}
    if environment:
        messages += drift_messages(resolved, environment["vllm"], environment["hardware"],
                                   environment["driver"])
    if not messages:
        return messages
    verified = latest_here(runs_base, resolved, environment) \
        if runs_base is not None and environment else None
    if verified is not None:
        messages.append(verified.line() + (" (so --strict accepts it)" if verified.holds
                                           else ""))
        if verified.holds:
            return messages
    if strict:
        raise DriftError("; ".join(messages) + ". Refusing to run with --strict: run `mopt "
                         "verify` to re-measure this revision here (--strict accepts it once "
                         "a verification holds), or re-validate it here (mopt sweep, mopt "
                         "optimize), or run without --strict.")
    return messages
