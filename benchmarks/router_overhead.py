"""The router's cost: the same tiny instance measured directly and through LiteLLM's proxy
(a one-instance fleet), side by side in one run, windows alternating (direct, router,
direct, ...) so a slow minute on a shared machine hits both alike.

Per window it prints req/s and TTFT p50 with their 95 % intervals (steady window); at the
end, per round, the ratios router/direct and their medians with the range (the noise).
One launch of the instance and one of the router; about 1 minute plus 2 x rounds x
--duration seconds. Figures: docs/benchmarks/router-overhead.md.

    .venv/bin/python benchmarks/router_overhead.py [--rounds 3] [--duration 10]
        [--concurrency 8] [--mock] [--runs-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

import yaml
from quiet import add_quiet_args, require_quiet

from model_optimizer.engine.factory import MockEngine
from model_optimizer.fleet import load_fleet
from model_optimizer.fleet.launch import (
    CLIENT_KEY_ENV,
    plan_instances,
    plan_router,
    router_executable,
)
from model_optimizer.fleet.router import Endpoint, router_config
from model_optimizer.recipe import load_recipe
from model_optimizer.runner import bench_endpoint

ROOT = Path(__file__).resolve().parents[1]


def one_instance_fleet(folder: Path) -> Path:
    """The tiny CPU recipe as the one instance of a fleet, every request to it."""
    doc = {"kind": "fleet", "fleet_version": 1, "name": "router-overhead",
           "hardware": {"accelerator": "cpu", "memory_gib": 2},
           "instances": {"only": {"recipe": str(ROOT / "recipes" / "tiny-cpu.yaml"),
                                  "kv_cache_gib": 1, "cores": [0]}},
           "router": {"model": "tiny-llama", "fallback": "only",
                      "routes": [{"class": "any", "to": "only"}]},
           "workload": {"prompt_tokens": 64, "output_tokens": 32}}
    path = folder / "router-overhead.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def window(url: str, model: str, args, runs: Path, key_env: str | None) -> dict:
    """One bench window against ``url``: (req/s, its half-width, TTFT p50, its half-width)."""
    sets = [f"workload.concurrency={args.concurrency}", f"workload.duration_s={args.duration}",
            "workload.num_requests=null", "workload.warmup_requests=4"]
    if key_env:
        sets.append(f"workload.api_key_env={key_env}")
    loaded = load_recipe(ROOT / "recipes" / "tiny-cpu.yaml", sets)
    tokenizer = str((ROOT / "models" / "tiny-llama").resolve())
    outcome = bench_endpoint(url, loaded, model, tokenizer, runs)
    m = outcome.metrics
    half = {k: (m.get("intervals") or {}).get(k, {}).get("half_width") for k in
            ("qps", "ttft_p50_ms")}
    return {"qps": m.get("qps"), "qps_hw": half["qps"], "ttft_p50_ms": m.get("ttft_p50_ms"),
            "ttft_p50_hw": half["ttft_p50_ms"], "completed": m.get("completed")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--duration", type=float, default=10)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--mock", action="store_true", help="the mock engine, not vLLM")
    parser.add_argument("--runs-dir", type=Path, default=None)
    add_quiet_args(parser)
    args = parser.parse_args()
    print(f"machine before: {require_quiet(args)}", flush=True)  # refuses when busy
    runs = args.runs_dir or Path(tempfile.mkdtemp(prefix="router-overhead-"))
    fleet = load_fleet(one_instance_fleet(runs))
    plans = plan_instances(fleet, MockEngine(ttft_ms=20, itl_ms=5) if args.mock else None)
    plan = plans["only"]
    config_path = runs / "router.yaml"
    config_path.write_text(yaml.safe_dump(router_config(
        fleet.router, {"only": Endpoint(plan.base_url, fleet.instances["only"].served_name)},
        300)))
    router_plan = plan_router(fleet, config_path, router_executable(), set())
    engine, router = plan.process(runs / "engine.log"), router_plan.process(runs / "router.log")
    rows = []
    try:
        engine.start()
        router.start()
        print(f"instance ready after {engine.wait_ready():.1f} s, router after "
              f"{router.wait_ready():.1f} s", flush=True)
        os.environ[CLIENT_KEY_ENV] = router_plan.key
        for number in range(1, args.rounds + 1):
            direct = window(plan.base_url, fleet.instances["only"].served_name, args, runs, None)
            routed = window(router_plan.base_url, fleet.router.model, args, runs, CLIENT_KEY_ENV)
            rows.append({"round": number, "direct": direct, "router": routed})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        router.stop()
        engine.stop()
    summarize(rows)
    (runs / "router-overhead.json").write_text(json.dumps(rows, indent=1))
    print(f"figures: {runs / 'router-overhead.json'}")


def summarize(rows: list[dict]) -> None:
    """Ratios router/direct per round, their median and range."""
    for key in ("qps", "ttft_p50_ms"):
        ratios = [r["router"][key] / r["direct"][key] for r in rows
                  if r["router"][key] and r["direct"][key]]
        if ratios:
            print(f"{key} router/direct: median {statistics.median(ratios):.3f}, "
                  f"range {min(ratios):.3f}-{max(ratios):.3f} over {len(ratios)} rounds")


if __name__ == "__main__":
    main()
