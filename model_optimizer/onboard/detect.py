"""What this machine has, for `mopt init`: the accelerator it sees and its memory.

NVML is imported lazily (``nvidia-ml-py``); without a driver the machine is ``cpu``. The
GPU's marketing name is matched against the planner's accelerator table.
"""

from __future__ import annotations

from dataclasses import dataclass

import psutil

from model_optimizer.plan.accelerators import ACCELERATORS

GIB = 1024**3


@dataclass(frozen=True)
class SeenHardware:
    """The accelerator name (a key of the planner's table), its device count and memory."""

    accelerator: str
    count: int
    memory_gib: float | None  # per device for GPUs; RAM for the CPU engine
    description: str


def match_gpu_name(name: str, memory_gib: float) -> str | None:
    """The table's name for an NVML device name ("NVIDIA H100 80GB HBM3" -> "H100")."""
    upper = name.upper()
    if "A100" in upper:
        return "A100-80GB" if memory_gib > 60 else "A100-40GB"
    for key in ("H200", "H100", "L40S", "A10", "L4"):  # A10 before L4, L40S before L4
        if key in upper:
            return key
    return None


def _nvml_devices() -> list[tuple[str, float]]:
    try:
        import pynvml
    except ImportError:
        return []
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver, no device: pynvml raises its own NVMLError kinds
        return []
    try:
        devices = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            name = name.decode() if isinstance(name, bytes) else name
            devices.append((name, pynvml.nvmlDeviceGetMemoryInfo(handle).total / GIB))
        return devices
    finally:
        pynvml.nvmlShutdown()


def seen_hardware() -> SeenHardware:
    """The first GPU NVML reports (and how many of that kind), else the CPU and its RAM."""
    devices = _nvml_devices()
    if devices:
        name, memory = devices[0]
        match = match_gpu_name(name, memory)
        count = sum(1 for other, _ in devices if other == name)
        if match is not None:
            return SeenHardware(match, count, round(memory, 2), f"{count} x {name}")
    ram = psutil.virtual_memory().total / GIB
    return SeenHardware("cpu", 1, float(int(ram)), f"CPU, {ram:.1f} GiB RAM")


def known_accelerators() -> list[str]:
    """The names `--accelerator` accepts."""
    return list(ACCELERATORS)
