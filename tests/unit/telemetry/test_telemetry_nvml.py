"""NVML probe: the real library on this machine, and the GPU code path through a fake `pynvml`.

The fake answers with recorded/documented values of an NVIDIA H200 (141 GB HBM3e): the name
NVML reports, 'NVIDIA H200'; memory total 150754820096 bytes (143771 MiB, as nvidia-smi lists an
H200 SXM); driver '570.124.06', a production branch driver whose CUDA driver version NVML gives
as 12080 (CUDA 12.8). These are values recorded from NVIDIA's documentation and published
nvidia-smi listings, not measured here (this machine has no GPU). The used memory, UUIDs and the
process list are illustrative values shaped like NVML's structures (`c_nvmlMemory_t`,
`c_nvmlProcessInfo_t`, where `usedGpuMemory` may be None).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from model_optimizer.telemetry.memory import NvmlProbe, hardware_seen

H200_NAME = "NVIDIA H200"
H200_MEMORY_TOTAL_BYTES = 150_754_820_096
H200_DRIVER_VERSION = "570.124.06"
H200_CUDA_DRIVER_VERSION = 12080
VLLM_USED_BYTES = 135_291_469_824  # illustrative: vLLM at gpu_memory_utilization=0.9
SERVER_PID = 4242
ENGINE_CORE_PID = 4243
ENGINE_CORE_GPU_BYTES = 134_217_728_000


class FakeNVMLError(Exception):
    """Stands in for pynvml.NVMLError."""


class FakeNVMLErrorLibraryNotFound(FakeNVMLError):
    """Stands in for pynvml.NVMLError_LibraryNotFound ("NVML Shared Library Not Found")."""


class FakeNvml:
    """A `pynvml` look-alike: H200s, optionally with bytes names (older pynvml releases)."""

    NVMLError = FakeNVMLError

    def __init__(self, device_count: int = 1, names_as_bytes: bool = False) -> None:
        self.device_count = device_count
        self.names_as_bytes = names_as_bytes
        self.init_calls = 0
        self.shutdown_calls = 0
        self.failing_memory_devices: set[int] = set()
        self.processes = [
            SimpleNamespace(pid=ENGINE_CORE_PID, usedGpuMemory=ENGINE_CORE_GPU_BYTES),
            SimpleNamespace(pid=SERVER_PID, usedGpuMemory=None),  # NVML could not tell
            SimpleNamespace(pid=777, usedGpuMemory=1_073_741_824),  # someone else
        ]

    def _text(self, text: str):
        return text.encode() if self.names_as_bytes else text

    def nvmlInit(self) -> None:  # noqa: N802 (pynvml's names)
        self.init_calls += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.shutdown_calls += 1

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        return self.device_count

    def nvmlDeviceGetHandleByIndex(self, index: int) -> str:  # noqa: N802
        return f"handle-{index}"

    def nvmlDeviceGetName(self, handle: str):  # noqa: N802
        return self._text(H200_NAME)

    def nvmlDeviceGetUUID(self, handle: str):  # noqa: N802
        index = int(handle.rsplit("-", 1)[1])
        return self._text(f"GPU-6b3e3c1a-2f4d-4c41-9a57-0000000000{index:02d}")

    def nvmlSystemGetDriverVersion(self):  # noqa: N802
        return self._text(H200_DRIVER_VERSION)

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:  # noqa: N802
        return H200_CUDA_DRIVER_VERSION

    def nvmlDeviceGetMemoryInfo(self, handle: str) -> SimpleNamespace:  # noqa: N802
        if int(handle.rsplit("-", 1)[1]) in self.failing_memory_devices:
            raise FakeNVMLError("GPU is lost")
        return SimpleNamespace(
            total=H200_MEMORY_TOTAL_BYTES,
            used=VLLM_USED_BYTES,
            free=H200_MEMORY_TOTAL_BYTES - VLLM_USED_BYTES,
        )

    def nvmlDeviceGetComputeRunningProcesses(self, handle: str) -> list:  # noqa: N802
        return self.processes if handle == "handle-0" else []


class NoDriverNvml(FakeNvml):
    """pynvml on a machine without the NVIDIA driver: nvmlInit raises."""

    def nvmlInit(self) -> None:  # noqa: N802
        self.init_calls += 1
        raise FakeNVMLErrorLibraryNotFound("NVML Shared Library Not Found")


NO_GPU_SAMPLE = {
    "gpu_mem_used_bytes": None,
    "gpu_mem_used_per_device": None,
    "gpu_proc_mem_bytes": None,
}


@pytest.mark.skipif(
    Path("/proc/driver/nvidia").exists(), reason="this machine has an NVIDIA driver"
)
def test_real_pynvml_on_a_machine_without_gpu_is_unavailable_and_quiet() -> None:
    probe = NvmlProbe()
    assert probe.available() is False
    assert probe.devices() == []
    assert probe.sample({os.getpid()}) == NO_GPU_SAMPLE
    assert probe.driver_version() is None
    assert probe.cuda_version() is None
    probe.close()
    probe.close()


def test_real_pynvml_never_raises() -> None:
    with NvmlProbe() as probe:
        available = probe.available()
        sample = probe.sample({os.getpid()})
        assert isinstance(probe.devices(), list)
    assert set(sample) == set(NO_GPU_SAMPLE)
    if not available:
        assert sample == NO_GPU_SAMPLE


def test_no_driver_is_unavailable_and_not_retried() -> None:
    fake = NoDriverNvml()
    probe = NvmlProbe(nvml=fake)
    assert probe.available() is False
    assert probe.sample({1}) == NO_GPU_SAMPLE
    assert probe.devices() == []
    assert fake.init_calls == 1
    probe.close()
    assert fake.shutdown_calls == 0


def test_missing_pynvml_module_is_unavailable(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    assert NvmlProbe().available() is False


def test_injected_module_through_sys_modules(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml())
    with NvmlProbe() as probe:
        assert probe.available() is True
        assert probe.devices()[0]["name"] == H200_NAME


@pytest.mark.parametrize("names_as_bytes", [False, True])
def test_devices_of_an_h200(names_as_bytes: bool) -> None:
    fake = FakeNvml(names_as_bytes=names_as_bytes)
    probe = NvmlProbe(nvml=fake)
    assert probe.available() is True
    assert probe.devices() == [
        {
            "index": 0,
            "name": H200_NAME,
            "uuid": "GPU-6b3e3c1a-2f4d-4c41-9a57-000000000000",
            "driver_version": H200_DRIVER_VERSION,
            "memory_total_bytes": H200_MEMORY_TOTAL_BYTES,
            "memory_used_bytes": VLLM_USED_BYTES,
        }
    ]
    assert probe.driver_version() == H200_DRIVER_VERSION
    assert probe.cuda_version() == "12.8"
    probe.close()
    assert fake.shutdown_calls == 1
    probe.close()
    assert fake.shutdown_calls == 1


def test_sample_sums_devices_and_our_processes_only() -> None:
    probe = NvmlProbe(nvml=FakeNvml(device_count=2))
    sample = probe.sample({SERVER_PID, ENGINE_CORE_PID})
    assert sample == {
        "gpu_mem_used_bytes": 2 * VLLM_USED_BYTES,
        "gpu_mem_used_per_device": [VLLM_USED_BYTES, VLLM_USED_BYTES],
        "gpu_proc_mem_bytes": ENGINE_CORE_GPU_BYTES,
    }


def test_sample_without_matching_pids_leaves_process_memory_unknown() -> None:
    probe = NvmlProbe(nvml=FakeNvml())
    assert probe.sample({1})["gpu_proc_mem_bytes"] is None
    assert probe.sample()["gpu_proc_mem_bytes"] is None
    assert probe.sample({SERVER_PID})["gpu_proc_mem_bytes"] is None  # usedGpuMemory None


def test_a_failing_device_leaves_its_entry_none() -> None:
    fake = FakeNvml(device_count=2)
    fake.failing_memory_devices = {1}
    sample = NvmlProbe(nvml=fake).sample({ENGINE_CORE_PID})
    assert sample["gpu_mem_used_per_device"] == [VLLM_USED_BYTES, None]
    assert sample["gpu_mem_used_bytes"] == VLLM_USED_BYTES
    assert sample["gpu_proc_mem_bytes"] == ENGINE_CORE_GPU_BYTES


def test_device_indices_restrict_the_probe() -> None:
    probe = NvmlProbe(nvml=FakeNvml(device_count=4), device_indices=[2])
    assert [device["index"] for device in probe.devices()] == [2]
    assert probe.sample()["gpu_mem_used_per_device"] == [VLLM_USED_BYTES]


def test_old_pynvml_without_cuda_version_v2() -> None:
    fake = FakeNvml()
    fake.nvmlSystemGetCudaDriverVersion_v2 = None  # not callable: like a missing function
    fake.nvmlSystemGetCudaDriverVersion = lambda: 12020
    assert NvmlProbe(nvml=fake).cuda_version() == "12.2"


def test_hardware_seen_with_an_h200() -> None:
    fake = FakeNvml()
    probe = NvmlProbe(nvml=fake)
    seen = hardware_seen(probe)
    assert seen["accelerator"] == "gpu"
    assert seen["gpus"] == [
        {
            "index": 0,
            "name": H200_NAME,
            "uuid": "GPU-6b3e3c1a-2f4d-4c41-9a57-000000000000",
            "memory_total_bytes": H200_MEMORY_TOTAL_BYTES,
        }
    ]
    assert seen["gpu_driver_version"] == H200_DRIVER_VERSION
    assert seen["cuda_driver_version"] == "12.8"
    assert seen["cpu_count_logical"] >= 1
    assert fake.shutdown_calls == 0  # a probe passed in stays open for its owner


def test_hardware_seen_without_driver() -> None:
    seen = hardware_seen(NvmlProbe(nvml=NoDriverNvml()))
    assert seen["accelerator"] == "cpu"
    assert seen["gpus"] == []


def test_hardware_label_names_the_gpus_else_the_cpu() -> None:
    from model_optimizer.telemetry import hardware_label

    with_gpu = hardware_seen(NvmlProbe(nvml=FakeNvml()))
    assert hardware_label(with_gpu) == f"1x {H200_NAME}"
    without = hardware_seen(NvmlProbe(nvml=NoDriverNvml()))
    assert hardware_label(without) == (without["cpu_model"] or "cpu")
    assert hardware_label({"gpus": [], "cpu_model": None}) == "cpu"
    assert hardware_label(None) is None  # an archive without a hardware record


class ThermalNvml(FakeNvml):
    """Adds the thermal calls; values read off a lent H200 under a bf16 matrix load
    (benchmarks/gpu_records/gpu-thermal.json, 2026-12-04): 63 C, SM 1440 MHz, memory
    3201 MHz, 691.9 W, 100% busy. The power call fails on device 1 (NVML not supported)."""

    NVML_TEMPERATURE_GPU, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2

    def nvmlDeviceGetTemperature(self, handle: str, sensor: int) -> int:  # noqa: N802
        assert sensor == self.NVML_TEMPERATURE_GPU
        return 63

    def nvmlDeviceGetClockInfo(self, handle: str, clock: int) -> int:  # noqa: N802
        return {self.NVML_CLOCK_SM: 1440, self.NVML_CLOCK_MEM: 3201}[clock]

    def nvmlDeviceGetPowerUsage(self, handle: str) -> int:  # noqa: N802
        if handle == "handle-1":
            raise FakeNVMLError("Not Supported")
        return 691_900

    def nvmlDeviceGetUtilizationRates(self, handle: str) -> SimpleNamespace:  # noqa: N802
        return SimpleNamespace(gpu=100, memory=62)


def test_thermals_per_device_with_unanswered_fields_none():
    rows = NvmlProbe(nvml=ThermalNvml(device_count=2)).thermals()
    assert rows[0] == {"index": 0, "temperature_c": 63, "sm_clock_mhz": 1440,
                       "mem_clock_mhz": 3201, "power_w": 691.9, "gpu_busy_pct": 100}
    assert rows[1]["power_w"] is None and rows[1]["sm_clock_mhz"] == 1440


def test_thermals_empty_without_nvml():
    assert NvmlProbe(nvml=NoDriverNvml()).thermals() == []
