"""Memory arithmetic: KV bytes per token, the KV budget per device, whole blocks, the
sequences that fit without preemption, and the bandwidth floor under TPOT.

The budget assumptions (GPU reserve, the CPU engine's ``VLLM_CPU_KVCACHE_SPACE``) are stated
once in :mod:`model_optimizer.plan.estimate`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from model_optimizer.plan.accelerators import GB, GIB, Accelerator
from model_optimizer.plan.architecture import request_bytes, token_bytes
from model_optimizer.plan.kvcache import DTYPE_BYTES
from model_optimizer.plan.model_shape import ModelShape
from model_optimizer.plan.moe import read_bytes
from model_optimizer.plan.report import DecodeFloor, PlanReport

GPU_RESERVE_GIB = 1.0
DEFAULT_BLOCK_SIZE_GPU = 16
DEFAULT_BLOCK_SIZE_CPU = 128  # vLLM's CPU platform default


def kv_bytes_per_token(shape: ModelShape, element_bytes: float, tensor_parallel: int = 1) -> int:
    """K and V bytes of one token on one device (KV heads are split over the TP ranks)."""
    return kv_bytes_per_token_of(shape, 2 * shape.head_dim * element_bytes, tensor_parallel)


def kv_bytes_per_token_of(shape: ModelShape, head_bytes: float, tensor_parallel: int = 1,
                          ds_mla: bool = False) -> int:
    """One token's KV bytes on one device over every attention layer (full and windowed),
    from the K+V bytes of one head (scales included): what vLLM's token count divides by.
    MLA layers hold one latent vector per token on every TP rank (``architecture``)."""
    return token_bytes(shape.layout, head_bytes, tensor_parallel, ds_mla=ds_mla)


def _flag(engine: dict, name: str) -> bool:
    value = (engine.get("extra_args") or {}).get(name)
    return value is not None and value is not False and str(value).lower() != "false"


def request_cost(report: PlanReport, shape: ModelShape, engine: dict, tokens: int,
                 step_tokens: int) -> int:
    """KV bytes one request of ``tokens`` takes on one device (vLLM's per-layer
    ``max_memory_usage_bytes``): windowed layers hold the window plus ``step_tokens``,
    Mamba layers their constant state, full layers every token."""
    att = shape.layout
    if _flag(engine, "disable-sliding-window"):
        att = replace(att, full_layers=att.attention_layers, windows=())
    per_layer = report.kv_bytes_per_token_per_device / max(1, att.attention_layers)
    state = math.ceil(att.state_elements * DTYPE_BYTES.get(report.dtype, 2)
                      / report.tensor_parallel_size)
    hybrid = not _flag(engine, "disable-hybrid-kv-cache-manager")
    return request_bytes(att, tokens, report.block_size, step_tokens, per_layer, state, hybrid)


def fill_sequences(report: PlanReport, shape: ModelShape, engine: dict, step_tokens: int) -> None:
    """Sequences that fit without preemption (decode: a windowed layer holds its window) and
    whether one ``max_model_len`` request fits (prefill chunks of ``step_tokens``)."""
    budget = max(0, report.kv_budget_bytes)
    per_seq = request_cost(report, shape, engine, report.seq_len, 1)
    report.max_seqs_no_preemption = budget // per_seq if report.kv_blocks else 0
    if report.max_model_len is not None:
        need = request_cost(report, shape, engine, report.max_model_len, step_tokens)
        report.request_bytes_max_model_len = need
        report.fits_max_model_len = report.kv_blocks > 0 and need <= budget


@dataclass
class _Budget:
    reserve: int
    kv_budget: int


def _gpu_budget(accel: Accelerator, utilization: float, weights: int) -> _Budget:
    reserve = int(GPU_RESERVE_GIB * GIB)
    return _Budget(reserve, int(accel.memory_bytes * utilization) - weights - reserve)


def _cpu_budget(accel: Accelerator, env: dict, weights: int, report: PlanReport) -> _Budget:
    space = env.get("VLLM_CPU_KVCACHE_SPACE")
    unset = _Budget(0, accel.memory_bytes - weights)
    if space is None:
        report.notes.append(
            "VLLM_CPU_KVCACHE_SPACE is not set: planned with memory_gib minus "
            "the weights, but vLLM takes half the machine's RAM; set it"
        )
        return unset
    try:
        space_gib = float(space)
    except ValueError:
        report.problems.append(f"engine.env VLLM_CPU_KVCACHE_SPACE={space!r} is not a number")
        return unset
    if not space_gib.is_integer():
        report.problems.append(
            f"engine.env VLLM_CPU_KVCACHE_SPACE={space!r}: vLLM accepts whole GiB only"
        )
    budget = int(space_gib * GIB)
    if budget + weights > accel.memory_bytes:
        report.warnings.append(
            f"KV space {space_gib:g} GiB plus weights {weights / GIB:.2f} GiB exceed "
            f"hardware.memory_gib {accel.memory_gib:g}"
        )
    return _Budget(0, budget)


def _decode_floor(label: str, batch: int, weights: float, seq_kv: int, gbps: float) -> DecodeFloor:
    seconds = (weights + batch * seq_kv) / (gbps * GB)
    return DecodeFloor(label, batch, seconds * 1000, batch / seconds)


def kv_read_bytes(report: PlanReport, shape: ModelShape, tokens: int) -> int:
    """KV (and state) bytes one decode step reads for one sequence of ``tokens`` on one
    device: full layers every token, windowed layers at most the window."""
    att = shape.layout
    per_layer = report.kv_bytes_per_token_per_device / max(1, att.attention_layers)
    held = att.full_layers * tokens + sum(n * min(w, tokens) for w, n in att.windows)
    state = att.state_elements * DTYPE_BYTES.get(report.dtype, 2) / report.tensor_parallel_size
    return math.ceil(per_layer * held + att.state_layers * state)


def fill_kv(report: PlanReport, engine: dict, accel: Accelerator, workload: dict) -> None:
    """KV budget, whole blocks, tokens and sequences that fit without preemption."""
    weights = report.weight_bytes_per_device
    explicit = (engine.get("extra_args") or {}).get("kv-cache-memory-bytes")
    if explicit is not None:
        # vLLM's --kv-cache-memory-bytes sizes the cache directly (per device), on CPU too,
        # taking precedence over gpu_memory_utilization and VLLM_CPU_KVCACHE_SPACE
        budget = _Budget(0, int(float(explicit)))
        report.notes.append(f"KV cache sized by extra_args kv-cache-memory-bytes={explicit}")
    elif accel.is_cpu:
        budget = _cpu_budget(accel, engine.get("env") or {}, weights, report)
    else:
        budget = _gpu_budget(accel, report.gpu_memory_utilization, weights)
    default_block = DEFAULT_BLOCK_SIZE_CPU if accel.is_cpu else DEFAULT_BLOCK_SIZE_GPU
    block = engine.get("block_size") or default_block
    report.reserve_bytes_per_device = budget.reserve
    report.kv_budget_bytes = budget.kv_budget
    report.block_size = block
    report.kv_blocks = max(0, budget.kv_budget // (report.kv_bytes_per_token_per_device * block))
    report.kv_tokens = report.kv_blocks * block
    report.seq_len = workload.get("prompt_tokens", 512) + workload.get("output_tokens", 128)
    report.blocks_per_seq = math.ceil(report.seq_len / block)
    report.max_seqs_no_preemption = report.kv_blocks // report.blocks_per_seq


def fill_decode_floors(report: PlanReport, shape: ModelShape) -> None:
    """Floors at batch 1, at the planner's maximum and at the recipe's max_num_seqs: every
    non-expert weight once, the routed experts the batch touches (:mod:`moe`), and each
    sequence's KV cache."""
    seq_kv = kv_read_bytes(report, shape, report.seq_len)
    batches = [("batch 1", 1)]
    if report.max_seqs_no_preemption > 1:
        batches.append(("planner max (no preemption)", report.max_seqs_no_preemption))
    source = "vLLM default" if report.recipe_max_num_seqs_is_default else "recipe"
    batches.append((f"max_num_seqs ({source})", report.recipe_max_num_seqs))
    report.decode_floors = [
        _decode_floor(label, batch, read_bytes(report.weight_bytes_per_device,
                                               report.expert_bytes_per_device, shape.moe, batch),
                      seq_kv, report.bandwidth_gbps)
        for label, batch in batches
    ]
