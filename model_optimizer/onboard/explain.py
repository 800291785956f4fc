"""The comments `mopt init` writes beside each value: where it comes from, what to change."""

from __future__ import annotations

from typing import Any

from model_optimizer.onboard.detect import SeenHardware
from model_optimizer.plan.kvcache import cpu_kv_dtype_problem
from model_optimizer.plan.quant_schemes import cpu_isa_problem
from model_optimizer.telemetry import cpu_flags


def comments(doc: dict, config: dict, hw: SeenHardware, work: Any,
             choices: dict) -> dict[str, Any]:
    """``{"section.key": comment}`` plus ``"__tail__"``: commented-out sections to fill."""
    engine, model = doc["engine"], doc["model"]
    cpu = hw.accelerator == "cpu"
    arch = ", ".join(config.get("architectures") or [config.get("model_type", "?")])
    notes: dict[str, Any] = {
        "model.path": f"{arch}; relative paths start at this file's folder",
        "model.dtype": f"config.json says {config.get('torch_dtype') or config.get('dtype')}",
        "model.quantization": ("from config.json quantization_config" if model["quantization"]
                               != "none" else "unquantized; `mopt quantize` makes a 4/8-bit "
                                              "checkpoint"),
        "model.served_name": "the model name clients send",
        "engine.kv_cache_dtype": ("model dtype; fp8 halves the KV bytes per token "
                                  + ("(CPU: auto or fp8 only)" if cpu else
                                     "(int8/int4_per_token_head, nvfp4: GPU kernels)")),
        "engine.max_model_len": (f"model limit {choices['position_limit']}; KV cache holds "
                                 f"{choices['kv_tokens']:,} tokens"),
        "engine.max_num_seqs": (f"planner: {choices['max_seqs_no_preemption']:,} sequences "
                                f"fit without preemption, vLLM default "
                                f"{choices['vllm_default_max_num_seqs']}; `mopt sweep` "
                                "measures the knee"),
        "engine.block_size": "the CPU attention backend needs a multiple of 32",
        "engine.enforce_eager": "no torch.compile warm-up: starts faster on CPU",
        "engine.env": "VLLM_CPU_KVCACHE_SPACE: GiB of KV cache, whole numbers only",
        "engine.gpu_memory_utilization": "share of GPU memory vLLM may take",
        "hardware.accelerator": f"seen or named: {hw.description}",
        "hardware.count": "devices of this kind (tensor_parallel_size <= count)",
        "hardware.memory_gib": ("RAM of this machine" if cpu else "per device, as the driver "
                                                                   "reports it"),
        "workload.prompt_tokens": f"from {work.source}",
        "workload.output_tokens": "max tokens generated per request",
        "workload.concurrency": "null: as many in flight as max_num_seqs batches",
        "workload.num_requests": "measured requests per run (warm-up excluded)",
        "workload.seed": "fixed: runs compare",
    }
    if choices.get("assumptions"):
        notes["engine.max_num_seqs"] = ("planner-derived under an ASSUMED architecture ("
                                        + "; ".join(choices["assumptions"]) + "): "
                                        + notes["engine.max_num_seqs"])
    if choices.get("moe"):
        notes["engine.max_num_seqs"] += "; " + choices["moe"]
    if engine.get("max_model_len", 0) < choices["position_limit"]:
        notes["engine.max_model_len"] += " (lowered to fit)"
    tail = [
        "slo: {}   # latency targets, e.g. ttft_p99_ms: 1000, tpot_p99_ms: 100, "
        "min_success_rate: 1.0",
        "sweep:",
        "  param: max_num_seqs",
        "  start: 1",
        f"  max: {max(2, engine['max_num_seqs'])}   # the planner's ceiling",
    ]
    if cpu:
        tail += cpu_candidates(cpu_flags())
    if work.prompt_file is not None:
        tail.insert(0, f"# prompts measured from {work.prompt_file}: calibrate "
                       "`mopt quantize` on it with quantize.calibration.file")
    notes["__tail__"] = tail
    return notes


def cpu_candidates(flags: frozenset[str]) -> list[str]:
    """An ``optimize`` section for a CPU recipe when this CPU cannot run the default candidates
    (W4A16 weights, an fp8 KV cache: both need AVX-512 on vllm-cpu 0.32); none otherwise."""
    if not (cpu_isa_problem("w4a16", flags) or cpu_kv_dtype_problem("fp8", flags)):
        return []
    lines = ["optimize:   # this CPU has no AVX-512: vllm-cpu cannot serve the default candidates "
             "(W4A16 weights, an fp8 KV cache) here",
             "  candidates:"]
    if cpu_isa_problem("w4a16", flags):
        lines.append("    - {name: fp8-dynamic, quantize: {scheme: fp8_dynamic}}   # FP8 weights: "
                     "served here by torch's scaled matmul (correct, not fast)")
    else:
        lines.append("    - {name: w4a16, quantize: {scheme: w4a16}}")
    if not cpu_kv_dtype_problem("fp8", flags):
        lines.append("    - {name: kv-fp8, kv_cache_dtype: fp8}")
    return lines
