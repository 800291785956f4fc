"""Memory and bandwidth arithmetic for one resolved recipe, from the model's config.json.

No accelerator, no vLLM; ``transformers`` (and torch) only to count parameters on the meta
device, once per config (cached: :mod:`param_count`). It answers: do the weights fit, how
many tokens the KV cache holds, how many sequences of the workload's length run without
preemption, will vLLM start with this ``max_model_len``, and what floor memory bandwidth
puts under TPOT.

The pieces live beside it: ``model_shape`` (config.json, parameter counts), ``architecture``
(the layers' KV layout as vLLM allocates it), ``moe`` (routing and what a step reads),
``weights`` and ``checkpoint_quant`` (weight bytes, a checkpoint's quantization and its
kernels), ``memory`` (KV budget, blocks, sequences, decode floors), ``report``
(:class:`PlanReport`) and ``checks`` (problems and warnings); this module wires them into
:func:`estimate` and :func:`fits` and re-exports their public names.

Assumptions, stated once here (the report's ``notes`` repeat those that apply):

- Parameters come from transformers' model class on the meta device, classified per module
  (embeddings, routed experts, shared experts, other linear layers, routers, towers, the
  rest); when transformers cannot build the config, from the Llama arithmetic (token
  embeddings; per layer q, k, v, o, MLP gate/up/down, two RMSNorms; a final norm; an lm_head
  unless tied; q/k/v biases for Qwen2 and ``attention_bias``; MoE experts of
  ``intermediate_size``), and the report says which (``param_source``).
- KV per token and per request follow vLLM's KV cache spec of each layer type
  (:mod:`architecture`): full attention, MLA, sliding windows (hybrid KV cache manager),
  Mamba state. An unknown ``model_type`` is planned as full attention with a warning.
- Quantization touches the linear layers (attention, MLP, experts); embeddings, lm_head,
  routers and norms stay in the activation dtype. A checkpoint's ``quantization_config``
  wins over the recipe's method (vLLM reads it): its bits and group scales, its coverage
  (gpt-oss MXFP4: routed experts only) and vLLM's kernels on the accelerator
  (:mod:`checkpoint_quant`). Otherwise GPTQ/AWQ-style 4-bit methods store, per group of 128
  weights, an fp16 scale and a 4-bit zero point: 4 + (16 + 4) / 128 = 4.15625 bits per
  weight (for Llama-2-7B this gives 3.89 GB, the size of the published GPTQ checkpoint).
  Other group layouts are in ``QUANT_RULES``. FP8 methods use 8 bits (their per-channel
  scales are negligible). ``model.weight_bits`` replaces the nominal bits; a method's group
  overhead still applies.
- GPU memory vLLM may use is ``memory * gpu_memory_utilization``; from it come the weights
  (split evenly over ``tensor_parallel_size``) and a fixed reserve of ``GPU_RESERVE_GIB``
  per device for the activation peak vLLM profiles at start, CUDA graphs and cuBLAS/NCCL
  workspaces. About 1 GiB is typical for 7-8B models at vLLM's default token budget; long
  ``max_num_batched_tokens`` or bigger models need more, so the plan is optimistic there.
- On the CPU engine the KV cache is ``VLLM_CPU_KVCACHE_SPACE`` GiB when ``engine.env`` sets
  it, else ``hardware.memory_gib`` minus the weights; no reserve is planned.
- The decode floor reads every non-expert weight once per step, the routed experts the
  batch touches (expected distinct experts under uniform routing, :mod:`moe`), and the KV
  cache of every sequence at its full length (windowed layers at most the window), at the
  table's peak bandwidth: a lower bound on TPOT.
"""

from __future__ import annotations

import math
from typing import Any

from model_optimizer.plan.accelerators import (
    Accelerator,
    resolve_hardware,
    vllm_default_max_num_seqs,
)
from model_optimizer.plan.checkpoint_files import CheckpointFiles, read_checkpoint
from model_optimizer.plan.checkpoint_quant import checkpoint_quant, kernel_verdict
from model_optimizer.plan.checks import check
from model_optimizer.plan.kvcache import DTYPE_BYTES, kv_dtype
from model_optimizer.plan.memory import (
    DEFAULT_BLOCK_SIZE_CPU,
    DEFAULT_BLOCK_SIZE_GPU,
    GPU_RESERVE_GIB,
    fill_decode_floors,
    fill_kv,
    fill_sequences,
    kv_bytes_per_token,
    kv_bytes_per_token_of,
)
from model_optimizer.plan.model_shape import (
    REQUIRED_CONFIG_FIELDS,
    ModelShape,
    load_model_config,
)
from model_optimizer.plan.protection import DEFAULT_STEP_TOKENS, apply_workload_shape
from model_optimizer.plan.report import DecodeFloor, PlanReport
from model_optimizer.plan.weights import (
    QUANT_RULES,
    QuantRule,
    expert_bytes,
    linear_weight_bits,
    resolve_dtype,
    weight_bytes,
)

# re-exported: callers import these from model_optimizer.plan.estimate (and the package)
__all__ = [
    "DEFAULT_BLOCK_SIZE_CPU",
    "DEFAULT_BLOCK_SIZE_GPU",
    "GPU_RESERVE_GIB",
    "QUANT_RULES",
    "REQUIRED_CONFIG_FIELDS",
    "DecodeFloor",
    "ModelShape",
    "PlanReport",
    "CheckpointFiles",
    "QuantRule",
    "estimate",
    "fits",
    "kv_bytes_per_token",
    "kv_bytes_per_token_of",
    "linear_weight_bits",
    "load_model_config",
    "read_checkpoint",
    "resolve_dtype",
    "weight_bytes",
]


def estimate(recipe: dict[str, Any], model_config: dict[str, Any],
             checkpoint: CheckpointFiles | None = None) -> PlanReport:
    """Plan one resolved recipe (all sections and defaults filled) for one model config.

    Engine values that are None mean vLLM's default. The report's ``problems`` are reasons
    vLLM would refuse to start; ``warnings`` are reasons the workload would suffer.
    ``checkpoint`` (:func:`read_checkpoint` of the model folder) replaces the computed
    weight bytes with what the safetensors files hold.
    """
    shape = ModelShape.from_config(model_config)
    model, engine, hardware, workload = (
        recipe.get(section) or {} for section in ("model", "engine", "hardware", "workload")
    )
    accel = resolve_hardware(hardware)
    report = _memory_report(shape, model, engine, accel, model_config)
    if checkpoint is not None:
        _weights_from_files(report, checkpoint, model_config)
    fill_kv(report, engine, accel, workload)
    apply_workload_shape(report, engine, workload)
    fill_sequences(report, shape, engine,
                   engine.get("max_num_batched_tokens") or DEFAULT_STEP_TOKENS)
    fill_decode_floors(report, shape)
    check(report, shape, engine, hardware, model)
    return report


def _weight_bits(shape: ModelShape, model: dict, config: dict, accel: Accelerator,
                 notes: list[str], problems: list[str]) -> tuple[Any, Any, bool]:
    """(nominal, effective, experts_only): the checkpoint's quantization_config first (vLLM
    reads it whatever the recipe says), else the recipe's method."""
    dtype_bits = 8 * DTYPE_BYTES[resolve_dtype(model.get("dtype", "auto"), shape, [])]
    quantization = model.get("quantization", "none")
    found = checkpoint_quant(config)
    if found is None:
        nominal, effective = linear_weight_bits(quantization, model.get("weight_bits"),
                                                dtype_bits, notes)
        return nominal, effective, False
    notes.append(found.describe())
    if quantization not in ("none", found.method) and \
            not quantization.startswith(found.method.split("_")[0]):
        problems.append(f"model.quantization {quantization} but the checkpoint is "
                        f"{found.method}: vLLM refuses a method the checkpoint was not made with")
    problem, note = kernel_verdict(found, accel.name)
    problems += [problem] if problem else []
    notes += [note] if note else []
    return found.bits, found.bits, found.experts_only


def _memory_report(shape: ModelShape, model: dict, engine: dict, accel: Accelerator,
                   config: dict) -> PlanReport:
    notes: list[str] = []
    problems: list[str] = []
    dtype = resolve_dtype(model.get("dtype", "auto"), shape, notes)
    dtype_bytes = DTYPE_BYTES[dtype]
    quantization = model.get("quantization", "none")
    nominal, effective, experts_only = _weight_bits(shape, model, config, accel, notes, problems)
    tp = engine.get("tensor_parallel_size", 1)
    weights = weight_bytes(shape, effective, dtype_bytes, experts_only)
    kv_name = engine.get("kv_cache_dtype", "auto")
    head_bytes = kv_dtype(kv_name).head_bytes(shape.head_dim, dtype)
    ds_mla = kv_name == "fp8_ds_mla"
    return PlanReport(
        accelerator=accel.name,
        memory_gib=accel.memory_gib,
        bandwidth_gbps=accel.bandwidth_gbps,
        tensor_parallel_size=tp,
        param_count=shape.param_count,
        dtype=dtype,
        quantization=quantization,
        weight_bits=float(nominal),
        linear_bits_effective=float(effective),
        weight_bytes=weights,
        weight_bytes_per_device=math.ceil(weights / tp),
        kv_cache_dtype=kv_name,
        kv_bytes_per_token=kv_bytes_per_token_of(shape, head_bytes, ds_mla=ds_mla),
        kv_bytes_per_token_per_device=kv_bytes_per_token_of(shape, head_bytes, tp, ds_mla),
        gpu_memory_utilization=None if accel.is_cpu else engine.get("gpu_memory_utilization", 0.9),
        reserve_bytes_per_device=0,
        kv_budget_bytes=0,
        block_size=0,
        kv_blocks=0,
        kv_tokens=0,
        max_model_len=engine.get("max_model_len") or shape.max_position_embeddings,
        fits_max_model_len=None,
        seq_len=0,
        blocks_per_seq=0,
        max_seqs_no_preemption=0,
        recipe_max_num_seqs=engine.get("max_num_seqs") or vllm_default_max_num_seqs(accel),
        recipe_max_num_seqs_is_default=engine.get("max_num_seqs") is None,
        notes=notes,
        problems=problems,
        param_source=shape.breakdown.source,
        expert_param_count=shape.expert_params,
        moe=shape.moe.describe() if shape.moe else None,
        attention=shape.layout.describe(),
        expert_bytes_per_device=math.ceil(expert_bytes(shape, effective) / tp),
    )


def _weights_from_files(report: PlanReport, files: CheckpointFiles, config: dict) -> None:
    """Weights as stored: a quantized checkpoint's bytes as they are; an unquantized one's
    elements at the served dtype (a float32 checkpoint is served in 16 bits)."""
    computed = report.weight_bytes
    if checkpoint_quant(config) is None and files.stored_elements:
        weights = files.stored_elements * DTYPE_BYTES[report.dtype]
        how = f"{files.stored_elements:,} elements in {files.source} x {report.dtype}"
    else:
        weights, how = files.weight_bytes, f"{files.weight_bytes:,} bytes in {files.source}"
    report.weight_bytes = weights
    report.weight_bytes_per_device = math.ceil(weights / report.tensor_parallel_size)
    report.param_source += f"; weights from {files.source}"
    report.notes.append(f"weights: {how} (computed from the config: {computed:,} bytes)")


def fits(recipe: dict[str, Any], model_config: dict[str, Any], *,
         without_preemption: bool = False) -> tuple[bool, str]:
    """The planner's one yes/no: (False, reasons) when vLLM would certainly fail to start;
    with ``without_preemption`` (what a search asks before a launch) also when the recipe's
    own ``max_num_seqs`` is more than the KV cache holds without preempting."""
    report = estimate(recipe, model_config)
    if not report.fits:
        return False, "; ".join(report.problems)
    seqs = report.recipe_max_num_seqs
    if without_preemption and not report.recipe_max_num_seqs_is_default \
            and seqs > report.max_seqs_no_preemption:
        return False, (f"the KV cache holds {report.kv_tokens:,} tokens: at most "
                       f"{report.max_seqs_no_preemption} sequences of {report.seq_len} tokens "
                       f"without preemption, fewer than max_num_seqs={seqs}")
    return True, "fits"
