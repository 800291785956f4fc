"""Memory probes: host RSS of a process tree, GPU memory through NVML, and the hardware seen.

vLLM runs its engine core in a child process of the API server, so host memory is measured over
the whole process tree. Note that RSS counts pages shared between processes (libraries, torch)
once per process: the tree sum overstates the true footprint a little; it is still the number
that grows when the KV cache or the batch grows, which is what a sweep watches.

NVML (`pynvml`, from the `nvidia-ml-py` distribution) is imported and initialised lazily and
every NVML failure is swallowed: on a machine without an NVIDIA driver `NvmlProbe.available()` is
False and the GPU fields of a sample are None. NVML sees every GPU of the host regardless of
`CUDA_VISIBLE_DEVICES`, and reports host PIDs: inside a container without the host PID namespace
the per-process GPU memory of our PIDs cannot be matched and stays None.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import Any

import psutil

_VANISHED = (psutil.NoSuchProcess, psutil.AccessDenied)


def _process_tree(pid: int) -> list[psutil.Process] | None:
    """The live process and its descendants, or None when the process is gone or a zombie."""
    try:
        root = psutil.Process(pid)
        if root.status() == psutil.STATUS_ZOMBIE:
            return None
        return [root, *root.children(recursive=True)]
    except _VANISHED:
        return None


def process_tree_pids(pid: int) -> set[int]:
    """PIDs of the process and all its descendants; empty when the process is gone."""
    tree = _process_tree(pid)
    return {process.pid for process in tree} if tree else set()


def process_tree_rss(pid: int) -> int | None:
    """Resident set size in bytes of the process plus all its descendants.

    None when the process does not exist (or has exited). Descendants that vanish during the walk
    are skipped; if the root itself vanishes mid-walk the result is None.
    """
    tree = _process_tree(pid)
    if tree is None:
        return None
    total_rss = 0
    for process in tree:
        try:
            total_rss += process.memory_info().rss
        except _VANISHED:
            if process.pid == pid:
                return None
    return total_rss


def _text(value: Any) -> str:
    """NVML strings: bytes in older pynvml releases, str in newer ones."""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _cuda_version_text(version: int) -> str:
    """NVML's CUDA driver version integer (12080) as text ("12.8")."""
    return f"{version // 1000}.{(version % 1000) // 10}"


class NvmlProbe:
    """GPU memory through NVML, opened on first use; never raises on machines without a GPU.

    `nvml` lets tests inject a fake `pynvml` module; by default `pynvml` is imported on first use.
    `device_indices` restricts the probe to some NVML device indices (default: all devices).
    """

    def __init__(
        self, nvml: ModuleType | Any | None = None, device_indices: Sequence[int] | None = None
    ) -> None:
        self._nvml = nvml
        self._device_indices = list(device_indices) if device_indices is not None else None
        self._initialised: bool | None = None  # None: not tried yet
        self._handles: list[tuple[int, Any]] = []

    def __enter__(self) -> NvmlProbe:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _open(self) -> bool:
        """Import and initialise NVML once; remember a failure instead of retrying."""
        if self._initialised is not None:
            return self._initialised
        self._initialised = False
        try:
            if self._nvml is None:
                import pynvml

                self._nvml = pynvml
            self._nvml.nvmlInit()
        except Exception:  # no module, no driver, NVMLError_LibraryNotFound, ...
            return False
        try:
            count = self._nvml.nvmlDeviceGetCount()
            indices = self._device_indices if self._device_indices is not None else range(count)
            self._handles = [(i, self._nvml.nvmlDeviceGetHandleByIndex(i)) for i in indices]
        except Exception:
            self._shutdown()
            return False
        self._initialised = True
        return True

    def available(self) -> bool:
        """True when NVML initialised and the devices could be enumerated."""
        return self._open()

    def _optional(self, function_name: str, *args: Any) -> Any:
        """Call an NVML function that may be missing or fail; None in that case."""
        try:
            return getattr(self._nvml, function_name)(*args)
        except Exception:
            return None

    def driver_version(self) -> str | None:
        """The NVIDIA driver version, e.g. '570.124.06'; None without NVML."""
        if not self._open():
            return None
        version = self._optional("nvmlSystemGetDriverVersion")
        return _text(version) if version is not None else None

    def cuda_version(self) -> str | None:
        """The highest CUDA version the driver supports, e.g. '12.8'; None without NVML."""
        if not self._open():
            return None
        version = self._optional("nvmlSystemGetCudaDriverVersion_v2")
        if version is None:
            version = self._optional("nvmlSystemGetCudaDriverVersion")
        return _cuda_version_text(int(version)) if version is not None else None

    def devices(self) -> list[dict[str, Any]]:
        """One dict per device: index, name, uuid, driver_version, memory total/used bytes.

        Empty when NVML is unavailable. A field NVML cannot answer is None.
        """
        if not self._open():
            return []
        driver_version = self.driver_version()
        devices = []
        for index, handle in self._handles:
            name = self._optional("nvmlDeviceGetName", handle)
            uuid = self._optional("nvmlDeviceGetUUID", handle)
            memory = self._optional("nvmlDeviceGetMemoryInfo", handle)
            devices.append(
                {
                    "index": index,
                    "name": _text(name) if name is not None else None,
                    "uuid": _text(uuid) if uuid is not None else None,
                    "driver_version": driver_version,
                    "memory_total_bytes": int(memory.total) if memory is not None else None,
                    "memory_used_bytes": int(memory.used) if memory is not None else None,
                }
            )
        return devices

    def _process_memory(self, handle: Any, pids: set[int]) -> int | None:
        """GPU memory of our PIDs on one device; None when none of them is listed with a size."""
        processes = self._optional("nvmlDeviceGetComputeRunningProcesses", handle)
        sizes = [
            int(process.usedGpuMemory)
            for process in processes or []
            if process.pid in pids and getattr(process, "usedGpuMemory", None) is not None
        ]
        return sum(sizes) if sizes else None

    def sample(self, pids: Iterable[int] = ()) -> dict[str, Any]:
        """Device memory used now, and the GPU memory held by `pids` where NVML reports it.

        Keys: `gpu_mem_used_bytes` (sum over devices), `gpu_mem_used_per_device` (list in device
        order), `gpu_proc_mem_bytes` (sum over devices and over the given PIDs). Each is None when
        unknown: no NVML, a failing call, or none of the PIDs listed (containers, MIG, WDDM).
        """
        result: dict[str, Any] = {
            "gpu_mem_used_bytes": None,
            "gpu_mem_used_per_device": None,
            "gpu_proc_mem_bytes": None,
        }
        if not self._open():
            return result
        pid_set = set(pids)
        used_per_device: list[int | None] = []
        process_bytes: list[int] = []
        for _index, handle in self._handles:
            memory = self._optional("nvmlDeviceGetMemoryInfo", handle)
            used_per_device.append(int(memory.used) if memory is not None else None)
            if pid_set:
                device_process_bytes = self._process_memory(handle, pid_set)
                if device_process_bytes is not None:
                    process_bytes.append(device_process_bytes)
        known_used = [used for used in used_per_device if used is not None]
        result["gpu_mem_used_per_device"] = used_per_device
        result["gpu_mem_used_bytes"] = sum(known_used) if known_used else None
        result["gpu_proc_mem_bytes"] = sum(process_bytes) if process_bytes else None
        return result

    def thermals(self) -> list[dict[str, Any]]:
        """Per device: temperature (C), SM and memory clocks (MHz), power (W), GPU busy (%).

        Empty without NVML; a field NVML cannot answer is None. A warm, steady card is what a
        comparable measurement needs (docs/production.md: a cold card reads faster at first).
        """
        if not self._open():
            return []
        nvml = self._nvml
        rows = []
        for index, handle in self._handles:
            temp = self._optional("nvmlDeviceGetTemperature", handle,
                                  getattr(nvml, "NVML_TEMPERATURE_GPU", 0))
            sm_clock = self._optional("nvmlDeviceGetClockInfo", handle,
                                      getattr(nvml, "NVML_CLOCK_SM", 1))
            mem_clock = self._optional("nvmlDeviceGetClockInfo", handle,
                                       getattr(nvml, "NVML_CLOCK_MEM", 2))
            power_mw = self._optional("nvmlDeviceGetPowerUsage", handle)
            util = self._optional("nvmlDeviceGetUtilizationRates", handle)
            rows.append({
                "index": index,
                "temperature_c": int(temp) if temp is not None else None,
                "sm_clock_mhz": int(sm_clock) if sm_clock is not None else None,
                "mem_clock_mhz": int(mem_clock) if mem_clock is not None else None,
                "power_w": round(power_mw / 1000.0, 1) if power_mw is not None else None,
                "gpu_busy_pct": int(util.gpu) if util is not None else None,
            })
        return rows

    def _shutdown(self) -> None:
        """nvmlShutdown, ignoring errors."""
        self._optional("nvmlShutdown")

    def close(self) -> None:
        """Shut NVML down if this probe initialised it; safe to call more than once."""
        if self._initialised:
            self._shutdown()
        self._initialised = None
        self._handles = []


def cpu_model_name() -> str:
    """The CPU model from /proc/cpuinfo ('model name'), else platform.processor(), else ''."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or ""


CPUINFO_PATH = "/proc/cpuinfo"


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (empty where it cannot be read)."""
    try:
        with open(CPUINFO_PATH, encoding="utf-8", errors="replace") as cpuinfo:
            for line in cpuinfo:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


def _usable_cpu_count() -> int | None:
    """CPUs this process may run on (cgroup/affinity aware where the OS tells us)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def hardware_seen(probe: NvmlProbe | None = None) -> dict[str, Any]:
    """What a run archive records as the hardware it ran on.

    Always: host CPU model, logical/physical/usable core counts, total RAM and platform. With NVML:
    `accelerator` "gpu", the GPUs (index, name, uuid, memory total), driver and CUDA versions;
    without: `accelerator` "cpu", an empty GPU list and None versions.
    """
    own_probe = probe is None
    probe = probe if probe is not None else NvmlProbe()
    try:
        gpus = [
            {key: device[key] for key in ("index", "name", "uuid", "memory_total_bytes")}
            for device in probe.devices()
        ]
        driver_version, cuda_version = probe.driver_version(), probe.cuda_version()
    finally:
        if own_probe:
            probe.close()
    return {
        "accelerator": "gpu" if gpus else "cpu",
        "gpus": gpus,
        "gpu_driver_version": driver_version,
        "cuda_driver_version": cuda_version,
        "cpu_model": cpu_model_name(),
        "cpu_count_logical": psutil.cpu_count(logical=True),
        "cpu_count_physical": psutil.cpu_count(logical=False),
        "cpu_count_usable": _usable_cpu_count(),
        "memory_total_bytes": psutil.virtual_memory().total,
        "platform": platform.platform(),
    }


def hardware_label(seen: dict[str, Any] | None) -> str | None:
    """The short hardware name recipes and the run index show, from a :func:`hardware_seen`
    record: ``"<n>x <GPU name>"``, else the CPU model; None without a record.

    The one definition of the label: the ``validated`` block of a written recipe, the drift
    check of ``mopt apply`` and the run index all compare these words.
    """
    if not isinstance(seen, dict):
        return None
    gpus = seen.get("gpus") or []
    if gpus:
        return f"{len(gpus)}x {gpus[0].get('name')}"
    return str(seen.get("cpu_model") or "cpu")


def this_hardware() -> str:
    """The hardware label of the machine this process runs on."""
    return hardware_label(hardware_seen()) or "cpu"
