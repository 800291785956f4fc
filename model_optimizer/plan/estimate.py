"""Memory and bandwidth arithmetic for one resolved recipe, from the model's config.json.

Pure: reads a ``config.json``, imports neither torch nor vLLM, touches no accelerator.
It answers: do the weights fit, how many tokens the KV cache holds, how many sequences of
the workload's length run without preemption, will vLLM start with this ``max_model_len``,
and what floor memory bandwidth puts under TPOT.

Assumptions, stated once here (the report's ``notes`` repeat those that apply):

- Parameters are counted for the Llama architecture (Mistral and Qwen2 share it): token
  embeddings; per layer q, k, v, o projections, MLP gate/up/down and two RMSNorms; a final
  norm; an lm_head unless ``tie_word_embeddings``; q/k/v biases for Qwen2 (and
  ``attention_bias``). Sliding windows are not modelled: the KV cache is planned in full.
- Quantization touches only the linear layers (q, k, v, o, gate, up, down). Embeddings,
  lm_head and norms stay in the activation dtype. GPTQ/AWQ-style 4-bit methods store, per
  group of 128 weights, an fp16 scale and a 4-bit zero point: 4 + (16 + 4) / 128 =
  4.15625 bits per weight (for Llama-2-7B this gives 3.89 GB, the size of the published
  GPTQ checkpoint). Other group layouts are in ``QUANT_RULES``. FP8 methods use 8 bits
  (their per-channel scales are negligible). ``model.weight_bits`` replaces the nominal
  bits; a method's group overhead still applies.
- GPU memory vLLM may use is ``memory * gpu_memory_utilization``; from it come the weights
  (split evenly over ``tensor_parallel_size``) and a fixed reserve of ``GPU_RESERVE_GIB``
  per device for the activation peak vLLM profiles at start, CUDA graphs and cuBLAS/NCCL
  workspaces. About 1 GiB is typical for 7-8B models at vLLM's default token budget; long
  ``max_num_batched_tokens`` or bigger models need more, so the plan is optimistic there.
- On the CPU engine the KV cache is ``VLLM_CPU_KVCACHE_SPACE`` GiB when ``engine.env`` sets
  it, else ``hardware.memory_gib`` minus the weights; no reserve is planned.
- The decode floor reads every weight once per step plus the KV cache of every sequence at
  its full length (prompt + output), at the table's peak bandwidth: a lower bound on TPOT.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from model_optimizer.plan.accelerators import (
    GB,
    GIB,
    Accelerator,
    PlanError,
    knob_multiple,
    resolve_hardware,
    vllm_default_max_num_seqs,
)
from model_optimizer.plan.kvcache import DTYPE_BYTES, kv_dtype, kv_dtype_verdict
from model_optimizer.plan.protection import apply_workload_shape
from model_optimizer.plan.quant_schemes import gpu_only_problem

GPU_RESERVE_GIB = 1.0
DEFAULT_BLOCK_SIZE_GPU = 16
DEFAULT_BLOCK_SIZE_CPU = 128  # vLLM's CPU platform default

REQUIRED_CONFIG_FIELDS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "vocab_size",
    "intermediate_size",
)
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


@dataclass(frozen=True)
class ModelShape:
    """The shape of a Llama-architecture model, read from its Hugging Face config.json."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    intermediate_size: int
    tie_word_embeddings: bool = False
    torch_dtype: str | None = None
    max_position_embeddings: int | None = None
    has_rope_scaling: bool = False
    qkv_bias: bool = False  # Qwen2 always, others when config.attention_bias

    @classmethod
    def from_config(cls, config: Any, source: str = "model config") -> ModelShape:
        """Build the shape from a config dict; PlanError naming ``source`` when it is unusable."""
        if not isinstance(config, dict):
            raise PlanError(f"{source}: expected a JSON object, got {type(config).__name__}")
        missing = [name for name in REQUIRED_CONFIG_FIELDS if config.get(name) is None]
        if missing:
            raise PlanError(f"{source}: missing field(s) {', '.join(missing)}")
        sizes = {name: _positive_int(config, name, source) for name in REQUIRED_CONFIG_FIELDS}
        heads = sizes["num_attention_heads"]
        return cls(
            num_layers=sizes["num_hidden_layers"],
            hidden_size=sizes["hidden_size"],
            num_attention_heads=heads,
            num_kv_heads=_optional_int(config, "num_key_value_heads", source) or heads,
            head_dim=_head_dim(config, sizes["hidden_size"], heads, source),
            vocab_size=sizes["vocab_size"],
            intermediate_size=sizes["intermediate_size"],
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            torch_dtype=config.get("torch_dtype") or config.get("dtype"),
            max_position_embeddings=_optional_int(config, "max_position_embeddings", source),
            has_rope_scaling=bool(config.get("rope_scaling")),
            qkv_bias=bool(config.get("attention_bias")) or config.get("model_type") == "qwen2",
        )

    @property
    def linear_params(self) -> int:
        """Weights of all q, k, v, o and MLP gate/up/down projections."""
        q_out = self.num_attention_heads * self.head_dim
        kv_out = self.num_kv_heads * self.head_dim
        attention = self.hidden_size * (2 * q_out + 2 * kv_out)  # q and o; k and v
        mlp = 3 * self.hidden_size * self.intermediate_size
        return self.num_layers * (attention + mlp)

    @property
    def embedding_params(self) -> int:
        """Token embeddings plus the lm_head (unless tied to the embeddings)."""
        tables = 1 if self.tie_word_embeddings else 2
        return tables * self.vocab_size * self.hidden_size

    @property
    def norm_params(self) -> int:
        """Two RMSNorm weight vectors per layer and the final norm."""
        return (2 * self.num_layers + 1) * self.hidden_size

    @property
    def bias_params(self) -> int:
        """q, k and v projection biases (Qwen2, ``attention_bias``); kept in the dtype."""
        if not self.qkv_bias:
            return 0
        return self.num_layers * (self.num_attention_heads + 2 * self.num_kv_heads) * self.head_dim

    @property
    def param_count(self) -> int:
        """All parameters of the model."""
        return self.linear_params + self.embedding_params + self.norm_params + self.bias_params


def _positive_int(config: dict, name: str, source: str) -> int:
    value = config.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PlanError(f"{source}: {name} must be a positive integer, got {value!r}")
    return value


def _optional_int(config: dict, name: str, source: str) -> int | None:
    return None if config.get(name) is None else _positive_int(config, name, source)


def _head_dim(config: dict, hidden: int, heads: int, source: str) -> int:
    explicit = _optional_int(config, "head_dim", source)
    if explicit is not None:
        return explicit
    if hidden % heads:
        raise PlanError(
            f"{source}: hidden_size {hidden} is not a multiple of "
            f"num_attention_heads {heads} and head_dim is not given"
        )
    return hidden // heads


def load_model_config(path: str | Path) -> dict[str, Any]:
    """Read a Hugging Face ``config.json`` (the file, or a model folder holding it).

    Raises PlanError naming the file when it is missing, is not valid JSON, or lacks the
    fields the planner needs.
    """
    file = Path(path)
    if file.is_dir():
        file = file / "config.json"
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanError(f"{file}: no such file (give a config.json or a model folder)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError(f"{file}: cannot read: {exc}") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"{file}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    ModelShape.from_config(config, source=str(file))
    return config


@dataclass(frozen=True)
class DecodeFloor:
    """Bandwidth floor of one decode step at a batch size, and the throughput ceiling."""

    label: str
    batch: int
    tpot_floor_ms: float
    tokens_per_s_ceiling: float


@dataclass
class PlanReport:
    """Result of :func:`estimate`. Byte figures are per device unless named otherwise."""

    accelerator: str
    memory_gib: float
    bandwidth_gbps: float
    tensor_parallel_size: int
    param_count: int
    dtype: str
    quantization: str
    weight_bits: float  # nominal bits of a linear-layer weight
    linear_bits_effective: float  # with the group scale/zero overhead
    weight_bytes: int  # all devices together
    weight_bytes_per_device: int
    kv_cache_dtype: str
    kv_bytes_per_token: int  # all devices together
    kv_bytes_per_token_per_device: int
    gpu_memory_utilization: float | None  # None on the CPU engine
    reserve_bytes_per_device: int
    kv_budget_bytes: int  # per device; negative when nothing is left
    block_size: int
    kv_blocks: int
    kv_tokens: int
    max_model_len: int | None  # the recipe's, else the model's max_position_embeddings
    fits_max_model_len: bool | None
    seq_len: int  # workload prompt_tokens + output_tokens
    blocks_per_seq: int
    max_seqs_no_preemption: int
    recipe_max_num_seqs: int
    recipe_max_num_seqs_is_default: bool
    decode_floors: list[DecodeFloor] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        """True when nothing stops vLLM from starting."""
        return not self.problems

    @property
    def verdict(self) -> str:
        """'fits', 'fits with warnings' or 'does not fit'."""
        if self.problems:
            return "does not fit"
        return "fits with warnings" if self.warnings else "fits"

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready), with ``verdict`` added."""
        return {**asdict(self), "verdict": self.verdict}


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


def weight_bytes(shape: ModelShape, linear_bits: Fraction, dtype_bytes: int) -> int:
    """Bytes of all weights: linear layers at ``linear_bits``, the rest at the dtype."""
    linear = math.ceil(shape.linear_params * linear_bits / 8)
    return linear + (shape.embedding_params + shape.norm_params + shape.bias_params) * dtype_bytes


def kv_bytes_per_token(shape: ModelShape, element_bytes: float, tensor_parallel: int = 1) -> int:
    """K and V bytes of one token on one device (KV heads are split over the TP ranks)."""
    return kv_bytes_per_token_of(shape, 2 * shape.head_dim * element_bytes, tensor_parallel)


def kv_bytes_per_token_of(shape: ModelShape, head_bytes: float, tensor_parallel: int = 1) -> int:
    """One token's KV bytes on one device from the K+V bytes of one head (scales included)."""
    kv_heads = max(1, shape.num_kv_heads // tensor_parallel)
    return math.ceil(shape.num_layers * kv_heads * head_bytes)


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


def _decode_floor(label: str, batch: int, weights: int, seq_kv: int, gbps: float) -> DecodeFloor:
    seconds = (weights + batch * seq_kv) / (gbps * GB)
    return DecodeFloor(label, batch, seconds * 1000, batch / seconds)


def estimate(recipe: dict[str, Any], model_config: dict[str, Any]) -> PlanReport:
    """Plan one resolved recipe (all sections and defaults filled) for one model config.

    Engine values that are None mean vLLM's default. The report's ``problems`` are reasons
    vLLM would refuse to start; ``warnings`` are reasons the workload would suffer.
    """
    shape = ModelShape.from_config(model_config)
    model, engine, hardware, workload = (
        recipe.get(section) or {} for section in ("model", "engine", "hardware", "workload")
    )
    accel = resolve_hardware(hardware)
    report = _memory_report(shape, model, engine, accel)
    _fill_kv(report, engine, accel, workload)
    apply_workload_shape(report, engine, workload)
    _fill_decode_floors(report)
    _check(report, shape, engine, hardware, model)
    return report


def _memory_report(shape: ModelShape, model: dict, engine: dict, accel: Accelerator) -> PlanReport:
    notes: list[str] = []
    dtype = resolve_dtype(model.get("dtype", "auto"), shape, notes)
    dtype_bytes = DTYPE_BYTES[dtype]
    quantization = model.get("quantization", "none")
    nominal, effective = linear_weight_bits(
        quantization, model.get("weight_bits"), 8 * dtype_bytes, notes
    )
    tp = engine.get("tensor_parallel_size", 1)
    weights = weight_bytes(shape, effective, dtype_bytes)
    kv_name = engine.get("kv_cache_dtype", "auto")
    head_bytes = kv_dtype(kv_name).head_bytes(shape.head_dim, dtype)
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
        kv_bytes_per_token=kv_bytes_per_token_of(shape, head_bytes),
        kv_bytes_per_token_per_device=kv_bytes_per_token_of(shape, head_bytes, tp),
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
    )


def _fill_kv(report: PlanReport, engine: dict, accel: Accelerator, workload: dict) -> None:
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
    if report.max_model_len is not None:
        report.fits_max_model_len = math.ceil(report.max_model_len / block) <= report.kv_blocks


def _fill_decode_floors(report: PlanReport) -> None:
    """Floors at batch 1, at the planner's maximum and at the recipe's max_num_seqs."""
    seq_kv = report.seq_len * report.kv_bytes_per_token_per_device
    batches = [("batch 1", 1)]
    if report.max_seqs_no_preemption > 1:
        batches.append(("planner max (no preemption)", report.max_seqs_no_preemption))
    source = "vLLM default" if report.recipe_max_num_seqs_is_default else "recipe"
    batches.append((f"max_num_seqs ({source})", report.recipe_max_num_seqs))
    report.decode_floors = [
        _decode_floor(label, batch, report.weight_bytes_per_device, seq_kv, report.bandwidth_gbps)
        for label, batch in batches
    ]


def _check(report: PlanReport, shape: ModelShape, engine: dict, hardware: dict,
           recipe_model: dict) -> None:
    """Fill ``problems`` (vLLM will not start) and ``warnings`` (the workload suffers)."""
    _check_parallelism(report, shape, hardware)
    _check_memory(report)
    _check_max_model_len(report, shape, engine)
    problem, note = kv_dtype_verdict(report.kv_cache_dtype, report.accelerator == "cpu")
    report.problems += [problem] if problem else []
    made_by = ((recipe_model.get("pins") or {}).get("quantize") or {}).get("scheme")
    if gpu_only := gpu_only_problem(made_by, report.accelerator == "cpu"):
        report.problems.append(gpu_only)
    report.notes += [note] if note else []
    multiple = knob_multiple("block_size", report.accelerator)
    if multiple and report.block_size % multiple:
        report.problems.append(
            f"block_size {report.block_size}: the CPU engine needs a multiple of {multiple}"
        )
    _check_batch(report)


def _check_parallelism(report: PlanReport, shape: ModelShape, hardware: dict) -> None:
    tp = report.tensor_parallel_size
    count = hardware.get("count", 1)
    if tp > count:
        report.problems.append(f"tensor_parallel_size {tp} exceeds hardware.count {count}")
    if shape.num_attention_heads % tp:
        report.problems.append(
            f"num_attention_heads {shape.num_attention_heads} is not "
            f"divisible by tensor_parallel_size {tp}"
        )


def _check_memory(report: PlanReport) -> None:
    weights_gib = report.weight_bytes_per_device / GIB
    if weights_gib > report.memory_gib:
        report.problems.append(
            f"weights alone take {weights_gib:.2f} GiB per device, more than the "
            f"{report.memory_gib:.2f} GiB of {report.accelerator}: quantize the model or "
            "raise tensor_parallel_size"
        )
    elif report.kv_blocks == 0:
        report.problems.append(
            f"no memory left for the KV cache ({report.kv_budget_bytes / GIB:.2f} GiB after "
            f"{weights_gib:.2f} GiB of weights and {report.reserve_bytes_per_device / GIB:.2f} "
            "GiB reserve): raise gpu_memory_utilization, quantize, or split with tensor "
            "parallelism"
        )


def _check_max_model_len(report: PlanReport, shape: ModelShape, engine: dict) -> None:
    max_len = report.max_model_len
    if max_len is None:
        report.notes.append("no max_model_len and no max_position_embeddings: not checked")
        return
    _check_position_limit(report, shape, engine)
    if report.kv_blocks and not report.fits_max_model_len:
        needed_gib = (
            math.ceil(max_len / report.block_size)
            * report.block_size
            * report.kv_bytes_per_token_per_device
            / GIB
        )
        report.problems.append(
            f"max_model_len {max_len} needs {needed_gib:.2f} GiB of KV cache but only "
            f"{report.kv_tokens} tokens fit: vLLM will refuse to start. Set max_model_len "
            f"<= {report.kv_tokens}, or use an fp8 KV cache, or free memory"
        )
    if report.seq_len > max_len:
        report.warnings.append(
            f"workload prompt + output = {report.seq_len} tokens exceeds max_model_len "
            f"{max_len}: vLLM rejects every request"
        )


def _check_position_limit(report: PlanReport, shape: ModelShape, engine: dict) -> None:
    asked, limit = engine.get("max_model_len"), shape.max_position_embeddings
    if asked is None or limit is None or asked <= limit:
        return
    if shape.has_rope_scaling:
        report.notes.append(
            f"max_model_len {asked} > max_position_embeddings {limit} with "
            "rope_scaling: not checked"
        )
        return
    text = f"max_model_len {asked} exceeds the model's max_position_embeddings {limit}"
    env = engine.get("env") or {}
    if str(env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "")).lower() in ("1", "true"):
        report.warnings.append(
            f"{text}; allowed by VLLM_ALLOW_LONG_MAX_MODEL_LEN, output "
            "past the trained length may be garbage"
        )
    else:
        report.problems.append(f"{text}: vLLM refuses to start (lower it to {limit})")


def _check_batch(report: PlanReport) -> None:
    limit, asked = report.max_seqs_no_preemption, report.recipe_max_num_seqs
    if report.kv_blocks == 0 or asked <= limit:
        return
    source = "vLLM's default" if report.recipe_max_num_seqs_is_default else "the recipe's"
    report.warnings.append(
        f"the KV cache holds {limit} sequences of {report.seq_len} tokens; {source} "
        f"max_num_seqs {asked} will preempt under full load"
    )


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
