"""Grid vs sweep: launches, wall time and how good the chosen max_num_seqs is (issue 11).

On the tiny CPU model, in one script and with the same steady-state windows (``--duration``
seconds, concurrency = max_num_seqs): ``mopt sweep --strategy probe-scan`` over 1..64 (one
scan server, the top two re-measured interleaved, one confirming launch); then a grid of
max_num_seqs, one launch per value (``--grid``, default the powers of two 1..64; issue 11's
finer grid is ``--grid 1,2,3,4,6,8,12,16,24,32,48,64``); then ``mopt sweep --strategy
relaunch`` (4, 16, 64, re-measurement 1 round, at most half the grid's launches).
Each choice is judged by the grid's own measurement of the chosen value (a value the grid
did not have gets one launch of its own, measured like the grid's) against the grid's best
and the grid's interval of its best. Goals: probe-scan at most 3 launches, relaunch at most
half the grid's; both at least 95% of the grid's best or inside its interval.

    .venv/bin/python benchmarks/sweep_vs_grid.py [--duration 10] [--grid 1,2,4,...]

About 2 + 7 + 6 launches: 15 minutes on 2 quiet cores with 10 s windows, twice that on a
busy machine. Archives go to a temp folder.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from model_optimizer.measure import variant
from model_optimizer.recipe import load_recipe
from model_optimizer.runner import run_recipe
from model_optimizer.sweep.loop import start_sweep

GRID = (1, 2, 4, 8, 16, 32, 64)


def measure_value(loaded, runs: Path, value: int) -> tuple[float | None, float | None]:
    """QPS and its 95% half-width at one value (one launch, the recipe's window)."""
    outcome = run_recipe(variant(loaded, [f"engine.max_num_seqs={value}",
                                          f"workload.concurrency={value}"]), runs)
    if not outcome.ok:
        return None, None
    interval = (outcome.metrics.get("intervals") or {}).get("qps") or {}
    return outcome.metrics.get("qps"), interval.get("half_width")


def measure_grid(loaded, runs: Path, values) -> dict[int, tuple]:
    """(QPS, half-width) at every grid value."""
    grid = {}
    for value in values:
        grid[value] = measure_value(loaded, runs, value)
        qps, half = grid[value]
        print(f"grid  max_num_seqs={value:>3}: {qps or 0:7.2f} ± {half or 0:5.2f} req/s",
              flush=True)
    return grid


def run_sweep(loaded, runs: Path, output: Path, flags: dict) -> tuple[dict, float]:
    """One sweep; returns its summary.json and wall time in seconds."""
    started = time.monotonic()
    outcome = start_sweep(loaded, runs, flags=flags, output=output)
    summary = json.loads((outcome.archive / "summary.json").read_text())
    for row in summary["steps"]:
        half = row.get("qps_half_width")
        print(f"  {row['phase']:<9} {row['value']:>4}: {row['qps'] or 0:7.2f}"
              f"{f' ± {half:.2f}' if half is not None else ''} req/s ({row['status']})",
              flush=True)
    return summary, time.monotonic() - started


def judge(name: str, summary: dict, seconds: float, grid: dict, loaded, runs: Path) -> None:
    """Print one search's figures against the grid."""
    best_value = max((v for v in grid if grid[v][0]), key=lambda v: grid[v][0])
    best_qps, best_half = grid[best_value]
    chosen = (summary.get("chosen") or {}).get("value")
    if chosen is None:
        print(f"{name}: chose nothing ({summary.get('chosen_reason')})")
        return
    chosen = int(chosen)
    if chosen not in grid:
        grid[chosen] = measure_value(loaded, runs, chosen)
        print(f"grid  max_num_seqs={chosen:>3}: {grid[chosen][0] or 0:7.2f} (measured for "
              f"the {name} choice)", flush=True)
    own = grid[chosen][0] or 0.0
    inside = best_half is not None and own >= best_qps - best_half
    noise = summary.get("noise") or {}
    grid_launches = summary["grid_launches"]
    print(f"{name}: {summary['launches']} launches ({summary['launches'] / grid_launches:.0%} "
          f"of the grid's), {seconds / 60:.1f} min, chose {chosen}; grid's own measurement "
          f"of it {own:.2f} req/s = {own / best_qps:.1%} of the grid's best "
          f"({best_qps:.2f} ± {best_half or 0:.2f} at {best_value})"
          f"{', inside its interval' if inside else ''}; measured noise CV "
          f"{noise.get('cv', float('nan')):.1%} over {noise.get('windows', 0)} windows",
          flush=True)


def main() -> None:
    """Measure the grid, run both sweep strategies, print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="recipes/tiny-cpu.yaml")
    parser.add_argument("--duration", type=float, default=10.0, help="window (s) per value")
    parser.add_argument("--grid", default=",".join(str(v) for v in GRID),
                        help="comma-separated max_num_seqs values of the grid")
    args = parser.parse_args()
    values = [int(v) for v in args.grid.split(",")]
    scratch = Path(tempfile.mkdtemp(prefix="mopt-bench-"))
    recipe_copy = scratch / "recipe.yaml"
    shutil.copy(args.recipe, recipe_copy)
    text = recipe_copy.read_text().replace("../models/", str(Path("models").resolve()) + "/")
    recipe_copy.write_text(text)
    common = [f"workload.duration_s={args.duration}", "workload.num_requests=null",
              "workload.concurrency=null", "sweep.max_launches=12"]
    loaded = load_recipe(recipe_copy, common)
    probe = load_recipe(recipe_copy, [*common, "sweep.resolution=4", "sweep.remeasure_rounds=2",
                                      f"sweep.confirm_duration_s={args.duration}"])
    print("sweep --strategy probe-scan --start 1 --max 64", flush=True)
    probe_summary, probe_s = run_sweep(probe, scratch / "probe", scratch / "probe.yaml",
                                       {"start": 1, "max": 64, "strategy": "probe-scan"})
    started = time.monotonic()
    grid = measure_grid(loaded, scratch / "grid", values)
    print(f"grid: {len(values)} launches, {(time.monotonic() - started) / 60:.1f} min",
          flush=True)
    judge("probe-scan", {**probe_summary, "grid_launches": len(values)}, probe_s, grid,
          loaded, scratch / "grid")
    relaunch = load_recipe(recipe_copy, [*common, "sweep.resolution=48",
                                         f"sweep.max_launches={len(values) // 2}",
                                         "sweep.remeasure_rounds=1", "sweep.confirm_duration_s=0"])
    print("sweep --strategy relaunch --start 4 --growth 4 --max 64", flush=True)
    summary, seconds = run_sweep(relaunch, scratch / "relaunch", scratch / "relaunch.yaml",
                                 {"start": 4, "growth": 4, "max": 64, "strategy": "relaunch"})
    judge("relaunch", {**summary, "grid_launches": len(values)}, seconds, grid, loaded,
          scratch / "grid")
    print(f"archives: {scratch}")


if __name__ == "__main__":
    main()
