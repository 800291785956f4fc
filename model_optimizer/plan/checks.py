"""The plan's verdict: ``problems`` (reasons vLLM will not start) and ``warnings`` (reasons
the workload suffers), checked on a filled :class:`PlanReport`."""

from __future__ import annotations

from model_optimizer.plan.accelerators import GIB, knob_multiple
from model_optimizer.plan.kvcache import kv_dtype_verdict
from model_optimizer.plan.model_shape import ModelShape
from model_optimizer.plan.quant_schemes import gpu_only_problem
from model_optimizer.plan.report import PlanReport


def check(report: PlanReport, shape: ModelShape, engine: dict, hardware: dict,
           recipe_model: dict) -> None:
    """Fill ``problems`` (vLLM will not start) and ``warnings`` (the workload suffers)."""
    _check_parallelism(report, shape, hardware)
    _note_expert_split(report, shape, engine)
    _check_memory(report)
    _check_max_model_len(report, shape, engine)
    problem, note = kv_dtype_verdict(report.kv_cache_dtype, report.accelerator == "cpu")
    report.problems += [problem] if problem else []
    _check_architecture(report, shape)
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


def _check_architecture(report: PlanReport, shape: ModelShape) -> None:
    """MLA-only KV dtypes, assumed architectures, where the parameter count came from."""
    layout = shape.layout
    if report.kv_cache_dtype == "fp8_ds_mla" and not layout.is_mla:
        report.problems.append(
            "kv_cache_dtype fp8_ds_mla is for MLA models (DeepSeek V2/V3, Kimi) only; this "
            "model has no kv_lora_rank: use fp8")
    report.warnings += list(layout.assumptions)
    if shape.model_type is None:
        report.notes.append("config.json names no model_type: planned with the Llama layout "
                            "(vLLM itself needs a model_type to load it)")
    if shape.counted is None:
        report.notes.append(f"parameters from {shape.breakdown.source}: transformers could "
                            "not build this config")
    if layout.windows:
        report.notes.append(
            "sliding-window layers hold at most their window (vLLM's hybrid KV cache "
            "manager); --disable-hybrid-kv-cache-manager allocates them in full when full "
            "layers are mixed in, --disable-sliding-window drops the window")
    if layout.state_layers:
        report.notes.append("Mamba layers hold a constant state per sequence; vLLM pads "
                            "every group's pages to one size (not planned)")
    if layout.sinks:
        report.notes.append("attention sinks: learned per-head logits, no KV cost")


def _note_expert_split(report: PlanReport, shape: ModelShape, engine: dict) -> None:
    """How the routed experts are split over the devices (see :mod:`moe`)."""
    tp = report.tensor_parallel_size
    if shape.moe is None or tp == 1:
        return
    if (engine.get("extra_args") or {}).get("enable-expert-parallel"):
        report.notes.append(f"expert parallelism: {shape.moe.experts / tp:g} whole experts "
                            f"per device of {shape.moe.experts}, attention split {tp} ways")
    else:
        report.notes.append(f"tensor parallelism slices each of the {shape.moe.experts} "
                            f"experts {tp} ways (enable-expert-parallel places them whole)")


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
        needed_gib = report.request_bytes_max_model_len / GIB
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
