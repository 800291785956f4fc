"""Long-request protection: does the short class's p99 TTFT improve with protection on?

Runs ``recipes/tiny-cpu-mix.yaml`` (90 % short requests, 10 % long ones with 1000-1700
prompt tokens and 256 output tokens, Poisson arrivals, a 16 MiB KV cache) on the real vLLM
CPU server in two configurations, alternating launches (A B A B ...) so a slow minute on a
shared machine hits both:

- **off**: one scheduler step may take 2048 tokens, no long-prefill cap, no output cap;
- **on**: the recipe as shipped: 512-token steps with chunked prefill,
  ``long_prefill_token_threshold: 128``, ``max_output_tokens: 64``.

Prints each run's per-class figures, then the medians over repeats and the ratio of the
short class's p99 TTFT (on / off) with the range of the repeats.

    .venv/bin/python benchmarks/long_request_protection.py [--repeats 2] [--rate 6]

About 2 minutes per launch on 2 cores. Archives go to a temp folder unless --runs-dir.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from model_optimizer.recipe import load_recipe
from model_optimizer.runner import run_recipe

ROOT = Path(__file__).resolve().parents[1]
OFF = ["engine.max_num_batched_tokens=2048", "engine.long_prefill_token_threshold=null",
       "engine.max_output_tokens=null"]
FIGURES = ("ttft_p50_ms", "ttft_p99_ms", "e2e_p99_ms", "qps", "capped_requests")


def measure(label: str, overrides: list[str], runs: Path) -> dict:
    """One archived run; returns its per-class figures."""
    loaded = load_recipe(ROOT / "recipes" / "tiny-cpu-mix.yaml", overrides)
    outcome = run_recipe(loaded, runs)
    if not outcome.ok:
        raise SystemExit(f"{label}: run {outcome.run_id} failed: {outcome.status}")
    classes = outcome.metrics["classes"]
    row = {cls: {k: figures.get(k) for k in FIGURES} for cls, figures in classes.items()}
    print(f"{label:4} {outcome.run_id}: " + "; ".join(
        f"{cls} TTFT p50 {f['ttft_p50_ms']:.0f} p99 {f['ttft_p99_ms']:.0f} ms, E2E p99 "
        f"{f['e2e_p99_ms']:.0f} ms, {f['qps']:.2f} req/s, capped {f['capped_requests']}"
        for cls, f in row.items()), flush=True)
    return row


def main() -> None:
    """Alternate off/on launches and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--rate", type=float, default=6.0, help="Poisson requests/s")
    parser.add_argument("--num-requests", type=int, default=150)
    parser.add_argument("--runs-dir", type=Path, default=None)
    args = parser.parse_args()
    runs = args.runs_dir or Path(tempfile.mkdtemp(prefix="mopt-protection-"))
    load = [f"workload.request_rate={args.rate}", f"workload.num_requests={args.num_requests}"]
    results: dict[str, list[dict]] = {"off": [], "on": []}
    for repeat in range(args.repeats):
        for label, overrides in (("off", OFF), ("on", [])):
            print(f"repeat {repeat + 1}/{args.repeats}: protection {label} ...", flush=True)
            results[label].append(measure(label, overrides + load, runs))
    print_summary(results)


def print_summary(results: dict[str, list[dict]]) -> None:
    """Medians per configuration and class, and the short class's p99 TTFT ratio."""
    print("\n| protection | class | TTFT p50 ms | TTFT p99 ms | E2E p99 ms | req/s | capped |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for label, rows in results.items():
        for cls in ("short", "long"):
            cells = [statistics.median(r[cls][k] for r in rows) for k in FIGURES]
            print(f"| {label} | {cls} | {cells[0]:.0f} | {cells[1]:.0f} | {cells[2]:.0f} | "
                  f"{cells[3]:.2f} | {cells[4]:.0f} |")
    ratios = [on["short"]["ttft_p99_ms"] / off["short"]["ttft_p99_ms"]
              for off, on in zip(results["off"], results["on"], strict=True)]
    print(f"\nshort p99 TTFT on/off per repeat: {', '.join(f'{r:.2f}' for r in ratios)} "
          f"(median {statistics.median(ratios):.2f}; < 1 means protection helped)")


if __name__ == "__main__":
    main()
