"""Weight storage: the activation dtype vLLM serves in, the bits of a quantized linear-layer
weight (``QUANT_RULES``), and the bytes of all weights.

The quantization assumptions (which layers, group overheads) are stated once in
:mod:`model_optimizer.plan.estimate`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from model_optimizer.plan.model_shape import ModelShape

_DTYPE_ALIASES = {"half": "float16", "float": "float32"}


@dataclass(frozen=True)
class QuantRule:
    """Storage of one quantization method's linear-layer weights."""

    bits: int
    group_size: int | None = None
    group_overhead_bits: int = 0  # scale (+ zero point) bits stored per group
    note: str = ""


_INT4_GROUPED = QuantRule(4, 128, 16 + 4)  # fp16 scale + 4-bit zero point per 128 weights
_FP8 = QuantRule(8)

QUANT_RULES: dict[str, QuantRule] = {
    **dict.fromkeys(
        (
            "gptq",
            "gptq_marlin",
            "gptq_bitblas",
            "awq",
            "awq_marlin",
            "bitblas",
            "moe_wna16",
            "auto-round",
            "inc",
        ),
        _INT4_GROUPED,
    ),
    "gptq_marlin_24": QuantRule(4, 128, 20, "2:4 sparsity is not modelled (an over-estimate)"),
    "bitsandbytes": QuantRule(4, 64, 32, "NF4 with an fp32 absmax per 64 weights"),
    "hqq": QuantRule(4, 64, 32, "fp16 scale and zero per 64 weights"),
    "mxfp4": QuantRule(4, 32, 8, "MXFP4: an 8-bit shared exponent per 32 weights"),
    "modelopt_fp4": QuantRule(4, 16, 8, "NVFP4: an fp8 scale per 16 weights"),
    **dict.fromkeys(("fp8", "ptpc_fp8", "fbgemm_fp8", "modelopt", "quark", "deepspeedfp"), _FP8),
}
# Methods whose bits depend on the checkpoint (gguf, compressed-tensors, torchao,
# experts_int8): planned at the activation dtype unless model.weight_bits says otherwise.


def resolve_dtype(recipe_dtype: str, shape: ModelShape, notes: list[str]) -> str:
    """The activation dtype vLLM will serve in: the recipe's, else the checkpoint's.

    Under ``auto`` vLLM serves float32 checkpoints (and those that name no dtype) in 16 bits.
    """
    if recipe_dtype != "auto":
        return _DTYPE_ALIASES.get(recipe_dtype, recipe_dtype)
    config_dtype = shape.torch_dtype
    if config_dtype in ("float16", "bfloat16"):
        return config_dtype
    notes.append(
        f"config dtype {config_dtype!r} under dtype auto: planned as 16-bit, "
        "as vLLM serves float32 checkpoints"
    )
    return "float16"


def linear_weight_bits(
    quantization: str, weight_bits: int | None, dtype_bits: int, notes: list[str]
) -> tuple[Fraction, Fraction]:
    """(nominal, effective) bits per linear-layer weight under the rules of ``QUANT_RULES``."""
    rule = QUANT_RULES.get(quantization)
    if rule is None:
        if quantization != "none" and weight_bits is None:
            notes.append(
                f"quantization {quantization!r}: bits depend on the checkpoint; "
                f"planned at {dtype_bits} bits, set model.weight_bits"
            )
        nominal = Fraction(weight_bits if weight_bits is not None else dtype_bits)
        return nominal, nominal
    if rule.note:
        notes.append(f"quantization {quantization!r}: {rule.note}")
    nominal = Fraction(weight_bits if weight_bits is not None else rule.bits)
    if rule.group_size is None:
        return nominal, nominal
    return nominal, nominal + Fraction(rule.group_overhead_bits, rule.group_size)


def weight_bytes(shape: ModelShape, linear_bits: Fraction, dtype_bytes: int,
                 experts_only: bool = False) -> int:
    """Bytes of all weights: the quantized ones (every linear layer, or only the routed
    experts) at ``linear_bits``, the rest at the dtype."""
    quantized = shape.expert_params if experts_only else shape.linear_params
    rest = shape.param_count - quantized
    return math.ceil(quantized * linear_bits / 8) + rest * dtype_bytes


def expert_bytes(shape: ModelShape, linear_bits: Fraction) -> int:
    """Bytes of the routed experts (quantized with the linear layers when they are)."""
    return math.ceil(shape.expert_params * linear_bits / 8)
