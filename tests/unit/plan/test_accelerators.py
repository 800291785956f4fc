"""Tests of the accelerator table and of the recipe's hardware overrides."""

from __future__ import annotations

import pytest

from model_optimizer.plan import (
    ACCELERATORS,
    PlanError,
    resolve_hardware,
    vllm_default_max_num_seqs,
)


def test_table_covers_every_accelerator_the_schema_allows(recipe_schema):
    allowed = recipe_schema["properties"]["hardware"]["properties"]["accelerator"]["enum"]
    assert sorted(allowed) == sorted(ACCELERATORS)


@pytest.mark.parametrize(
    ("name", "mib", "gbps"),
    [
        # driver-reported memory.total in MiB; datasheet peak bandwidth in GB/s
        ("A10", 23028, 600),
        ("L4", 23034, 300),
        ("L40S", 46068, 864),
        ("A100-40GB", 40960, 1555),
        ("A100-80GB", 81920, 2039),
        ("H100", 81559, 3350),
        ("H200", 143771, 4800),
    ],
)
def test_gpu_rows_hold_driver_memory_and_datasheet_bandwidth(name, mib, gbps):
    accel = ACCELERATORS[name]
    assert accel.memory_gib == mib / 1024
    assert accel.memory_bytes == mib * 1024 * 1024
    assert accel.bandwidth_gbps == gbps
    assert accel.source.startswith("NVIDIA")
    assert not accel.is_cpu


def test_memory_is_binary_not_decimal_gigabytes():
    # an "80 GB" A100 reports 81920 MiB: exactly 80 GiB, not 80e9 / 2**30 = 74.5 GiB
    assert ACCELERATORS["A100-80GB"].memory_gib == 80.0
    # the "24 GB" A10 leaves 23028 MiB = 22.488 GiB to CUDA
    assert ACCELERATORS["A10"].memory_gib == pytest.approx(22.488, abs=1e-3)


def test_cpu_row_is_a_stated_placeholder():
    cpu = ACCELERATORS["cpu"]
    assert cpu.is_cpu
    assert (cpu.memory_gib, cpu.bandwidth_gbps) == (4.0, 20.0)
    assert "placeholder" in cpu.source


def test_resolve_without_overrides_returns_the_table_row():
    hardware = {"accelerator": "L4", "memory_gib": None, "bandwidth_gbps": None, "count": 1}
    assert resolve_hardware(hardware) is ACCELERATORS["L4"]


def test_resolve_applies_memory_and_bandwidth_overrides():
    hardware = {"accelerator": "A10", "memory_gib": 20, "bandwidth_gbps": 480.5, "count": 1}
    accel = resolve_hardware(hardware)
    assert (accel.name, accel.memory_gib, accel.bandwidth_gbps) == ("A10", 20.0, 480.5)
    assert accel.memory_bytes == 20 * 2**30
    assert "memory_gib from recipe" in accel.source
    assert "bandwidth_gbps from recipe" in accel.source
    # the table itself is untouched
    assert ACCELERATORS["A10"].memory_gib == 23028 / 1024


def test_resolve_overrides_one_field_only():
    accel = resolve_hardware({"accelerator": "cpu", "memory_gib": 2})
    assert (accel.memory_gib, accel.bandwidth_gbps) == (2.0, 20.0)


def test_unknown_accelerator_names_the_choices():
    with pytest.raises(PlanError, match="unknown accelerator 'A10G'") as info:
        resolve_hardware({"accelerator": "A10G"})
    assert "did you mean 'A10'" in str(info.value)
    assert "H200" in str(info.value)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("A10", 256),
        ("L4", 256),
        ("L40S", 256),
        ("A100-40GB", 256),
        ("A100-80GB", 256),
        ("H100", 1024),
        ("H200", 1024),
        ("B200", 1024),
        ("MI300X", 1024),
        ("cpu", 128),
    ],
)
def test_vllm_default_max_num_seqs_follows_vllm_rule(name, expected):
    # vLLM: >= 70 GiB and not an A100 -> 1024; other GPUs 256; the CPU engine 128
    assert vllm_default_max_num_seqs(ACCELERATORS[name]) == expected


@pytest.mark.parametrize(
    ("name", "mib", "gbps", "vendor"),
    [
        # DGX B200: 1,440 GB and 64 TB/s over 8 GPUs; nvidia-smi 183359 MiB
        ("B200", 183359, 8000, "NVIDIA"),
        # MI300X datasheet: 192 GB HBM3, 5.3 TB/s; rocm-smi 196592 MiB
        ("MI300X", 196592, 5300, "AMD"),
    ],
)
def test_rows_people_rent_now(name, mib, gbps, vendor):
    accel = ACCELERATORS[name]
    assert (accel.memory_gib, accel.bandwidth_gbps) == (mib / 1024, gbps)
    assert accel.source.startswith(vendor)


@pytest.mark.parametrize(("typed", "row"), [("a10", "A10"), ("h200", "H200"), ("l40s", "L40S"),
                                             ("mi300x", "MI300X"), ("a100-80gb", "A100-80GB"),
                                             ("A100-40G", "A100-40GB"), ("CPU", "cpu")])
def test_names_are_case_insensitive(typed, row):
    assert resolve_hardware({"accelerator": typed}) is ACCELERATORS[row]


def test_did_you_mean_stays_in_the_family():
    with pytest.raises(PlanError) as info:
        resolve_hardware({"accelerator": "a100"})  # two A100 rows: ambiguous, not an H100
    assert "did you mean 'A100-40GB' or 'A100-80GB'?" in str(info.value)
    assert "did you mean 'H100'" not in str(info.value)
    with pytest.raises(PlanError, match="did you mean 'H100' or 'H200'"):
        resolve_hardware({"accelerator": "H300"})
    with pytest.raises(PlanError, match="did you mean 'B200'"):
        resolve_hardware({"accelerator": "b100"})
