"""A/B on one tiny-cpu server: does mopt's 1 Hz /metrics scrape stall vLLM's API server?

Arms alternate on one server (on, off, off, on, on, off): ``mopt bench --url`` pinned to the
client's core (``taskset -c 1``, where ``placement: auto`` puts it), with telemetry at 1 Hz
or effectively off. Per arm: req/s, TTFT p50, the share of requests whose every token reached
the client in one read ("stalled"), the starved share, the load average. Figures:
docs/benchmarks/log/agreement.md.

    flock /work/cpu.lock .venv/bin/python benchmarks/scrape_stall_ab.py
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from quiet import add_quiet_args, require_quiet  # noqa: E402

from model_optimizer.engine.factory import plan_server  # noqa: E402
from model_optimizer.recipe import load_recipe  # noqa: E402

RUN_CLI = ("import sys; from model_optimizer.cli.main import app; "
           "app(prog_name='mopt', args=sys.argv[1:])")
NO_TELEMETRY = "import model_optimizer.window as w; w.SAMPLE_INTERVAL_S = 3600.0; " + RUN_CLI
ARMS = ("on", "off", "off", "on", "on", "off")


def _bench(url: str, telemetry: bool, runs: Path) -> dict:
    code = RUN_CLI if telemetry else NO_TELEMETRY
    cmd = ["taskset", "-c", "1", sys.executable, "-c", code, "bench", "--url", url,
           "--tokenizer", str(ROOT / "models/tiny-llama"), "--prompt-tokens", "64",
           "--output-tokens", "32", "--concurrency", "8", "--num-requests", "300",
           "--runs-dir", str(runs), "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    if out.returncode != 0:
        raise SystemExit(f"bench failed ({out.returncode}): {out.stderr[-2000:]}")
    metrics = json.loads(out.stdout)["metrics"]
    archive = next(p for p in runs.iterdir() if p.is_dir())
    with open(archive / "requests.jsonl") as handle:
        records = [json.loads(line) for line in handle]
    records = [r for r in records if not r["warmup"] and r["ok"]]
    stalled = sum(r["e2e_s"] - r["ttft_s"] < 0.005 for r in records) / len(records)
    return {"qps": round(metrics["qps"], 1), "ttft_p50_ms": round(metrics["ttft_p50_ms"], 1),
            "stalled": round(stalled, 3),
            "starved": round((metrics.get("feed") or {}).get("starved_share") or 0, 3),
            "load": round(os.getloadavg()[0], 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_quiet_args(parser)
    print(f"machine before: {require_quiet(parser.parse_args())}", flush=True)
    plan = plan_server(load_recipe(ROOT / "recipes/tiny-cpu.yaml", []))
    out = Path(tempfile.mkdtemp(prefix="scrape-stall-ab-"))
    with plan.process(out / "engine.log") as engine:
        engine.wait_ready()
        print(f"placement {plan.placement.mode}; load {os.getloadavg()[0]:.2f}", flush=True)
        for index, arm in enumerate(ARMS):
            row = _bench(engine.base_url, arm == "on", out / f"runs{index}")
            print(arm, row, flush=True)


if __name__ == "__main__":
    main()
