"""Quantized checkpoints as they ship: the ``quantization_config`` of a config.json read into
bits per stored weight, which weights it covers, and whether vLLM has a kernel for it on
the recipe's accelerator.

Bits per weight include the scales stored beside the weights: ``bits + scale_bits / group``
(+ a zero point of ``bits`` per group when asymmetric). GPTQ and AWQ store fp16 scales and
packed zero points per ``group_size`` weights; compressed-tensors names ``num_bits``,
``group_size``, ``strategy`` and ``symmetric`` per config group; FP8 (per tensor/channel/
block) is 8 bits; MXFP4 as gpt-oss ships it is 4 bits with an 8-bit shared exponent per
32 weights, on the routed experts only (``modules_to_not_convert`` keeps attention, router,
embeddings and lm_head in bf16); NVFP4 is 4 bits with an fp8 scale per 16 weights.

Kernels, from vLLM 0.32's source (``get_min_capability`` of each quantization config and the
MoE backend oracles in ``vllm/model_executor/layers/fused_moe/oracle/``): on NVIDIA GPUs
FP8 needs compute capability 7.5 (native on 8.9+, Marlin weight-only below), MXFP4 8.0
(``Mxfp4Config``), NVFP4 7.5 (native on Blackwell, Marlin W4A16 below:
``marlin_utils_fp4.is_fp4_marlin_supported``), GPTQ/AWQ Marlin 8.0; ROCm lists gptq, awq,
fp8, compressed-tensors, mxfp4 and modelopt_fp4 (``platforms/rocm.py``); the CPU engine
serves GPTQ-style int4, int8 and FP8 (measured, :mod:`quant_schemes`) and MXFP4 MoE
(``Mxfp4MoeBackend.CPU``), not NVFP4 (measured: no kernel).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from model_optimizer.plan.quant_schemes import SCHEMES

#: NVIDIA compute capability of each GPU row (CUDA GPUs table); None: not CUDA
COMPUTE_CAPABILITY = {"A10": 86, "L4": 89, "L40S": 89, "A100-40GB": 80, "A100-80GB": 80,
                      "H100": 90, "H200": 90, "B200": 100}
#: scheme -> the `mopt quantize` scheme whose measured CPU result stands for it
_MEASURED_ON_CPU = {"int4": "w4a16", "int8": "w8a8", "fp8": "fp8_dynamic", "nvfp4": "nvfp4"}
#: scheme -> (minimum CUDA capability, native from, runs on ROCm, runs on the CPU engine);
#: the CPU column is quant_schemes' measurement, MXFP4's from vLLM's Mxfp4MoeBackend.CPU
KERNELS = {
    scheme: (minimum, native, rocm,
             SCHEMES[_MEASURED_ON_CPU[scheme]].cpu_servable if scheme in _MEASURED_ON_CPU
             else True)
    for scheme, minimum, native, rocm in (("int4", 80, 80, True), ("int8", 75, 75, True),
                                          ("fp8", 75, 89, True), ("mxfp4", 80, 100, True),
                                          ("nvfp4", 75, 100, False))
}


@dataclass(frozen=True)
class CheckpointQuant:
    """A checkpoint's quantization: vLLM method, scheme, effective bits, coverage."""

    method: str  # vLLM's --quantization name (as the checkpoint names it)
    scheme: str  # int4, int8, fp8, mxfp4 or nvfp4: which kernels it needs
    bits: Fraction  # per quantized weight, scales included
    experts_only: bool = False  # only routed experts are quantized (gpt-oss MXFP4)

    def describe(self) -> str:
        """One line for the plan's notes."""
        cover = "routed experts" if self.experts_only else "linear layers"
        return (f"checkpoint quantized with {self.method} ({self.scheme}, "
                f"{float(self.bits):.3f} bits per weight on its {cover})")


def _grouped(bits: int, group: int | None, symmetric: bool = True) -> Fraction:
    if not group or group < 0:
        return Fraction(bits)
    return Fraction(bits) + Fraction(16 + (0 if symmetric else bits), group)


def _compressed_tensors(qc: dict) -> CheckpointQuant:
    weights = next((g.get("weights") or {} for g in (qc.get("config_groups") or {}).values()),
                   {})
    bits, kind = int(weights.get("num_bits") or 8), weights.get("type", "int")
    group = weights.get("group_size") if weights.get("strategy") in ("group", "tensor_group") \
        else None
    if kind == "float" and bits == 4:
        return CheckpointQuant("compressed-tensors", "nvfp4", Fraction(4) + Fraction(8, 16))
    if kind == "float":
        return CheckpointQuant("compressed-tensors", "fp8", Fraction(8))
    scheme = "int4" if bits <= 4 else "int8"
    return CheckpointQuant("compressed-tensors", scheme,
                           _grouped(bits, group, weights.get("symmetric", True)))


def checkpoint_quant(config: dict[str, Any]) -> CheckpointQuant | None:
    """The checkpoint's quantization from ``quantization_config``, or None when it has none
    (or names a method the planner does not read: the recipe's figures apply then)."""
    qc = config.get("quantization_config")
    if not isinstance(qc, dict):
        return None
    method = str(qc.get("quant_method", "")).lower()
    if method in ("gptq", "awq"):
        bits = int(qc.get("bits") or qc.get("w_bit") or 4)
        group = qc.get("group_size") or qc.get("q_group_size")
        return CheckpointQuant(method, "int4" if bits <= 4 else "int8", _grouped(bits, group,
                               bool(qc.get("sym", True)) and method == "gptq"))
    if method == "compressed-tensors":
        return _compressed_tensors(qc)
    if method in ("fp8", "fbgemm_fp8"):
        return CheckpointQuant(method, "fp8", Fraction(8))
    if method == "mxfp4":
        return CheckpointQuant("mxfp4", "mxfp4", Fraction(4) + Fraction(8, 32), True)
    if method == "modelopt":
        algo = str(qc.get("quant_algo", "")).upper()
        if "FP4" in algo:
            return CheckpointQuant("modelopt_fp4", "nvfp4", Fraction(4) + Fraction(8, 16))
        return CheckpointQuant("modelopt", "fp8", Fraction(8))
    return None


def kernel_verdict(quant: CheckpointQuant, accelerator: str) -> tuple[str | None, str | None]:
    """(problem, note): a problem when vLLM has no kernel for the scheme on ``accelerator``;
    a note when it runs weight-only (Marlin) rather than natively."""
    minimum, native, rocm, cpu = KERNELS[quant.scheme]
    what = f"{quant.method} ({quant.scheme}) checkpoint"
    if accelerator == "cpu":
        return (None, None) if cpu else (f"{what}: vLLM's CPU engine has no kernel for "
                                         f"{quant.scheme}; use a GPU or another scheme", None)
    if accelerator == "MI300X":
        return (None, None) if rocm else (f"{what}: vLLM on ROCm (MI300X) has no kernel for "
                                          f"{quant.scheme}", None)
    capability = COMPUTE_CAPABILITY.get(accelerator)
    if capability is None:
        return None, None
    if capability < minimum:
        return (f"{what}: needs compute capability {minimum / 10:.1f}, {accelerator} has "
                f"{capability / 10:.1f}"), None
    if capability < native:
        return None, (f"{what} runs weight-only (Marlin) on {accelerator}: memory and decode "
                      f"as planned, prefill compute in 16 bits")
    return None, None
