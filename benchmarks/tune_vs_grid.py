"""Tune (scanning max_num_seqs) vs a grid of separate launches: launches, wall time, and how
good tune's choice is by the grid's own measurement (issue 11).

On the tiny CPU model, in one script and with the same steady-state windows (``--duration``
seconds, 95% intervals by batch means), through the same ``start_tune``:

1. the grid: every combination of max_num_seqs (``--levels``, default the powers of two
   1..64) x a second knob (``--second``, default block_size 32 and 64), one launch each
   (``sampler grid``, ``strategy relaunch``);
2. tune: TPE with ``strategy scan`` (each trial one launch of the second knob's value that
   measures every max_num_seqs level on it) and a budget of ``--budget`` trials (default
   half the grid's launches), then the confirming launch of its choice.

Prints both searches' launches, windows and wall time, the chosen configuration, the grid's
own measurement of tune's choice as a fraction of the grid's best and whether it lies
inside the grid's 95% interval of its best, and the noise (median relative half-width of
the grid's windows). Goal (issue 11): at least 95% of the grid's best, or inside its
interval.

    .venv/bin/python benchmarks/tune_vs_grid.py [--duration 8] [--levels 1,2,4,...]
        [--second block_size=32,64] [--budget 7]

About 14 + 3 launches: 15-20 minutes on 2 quiet cores with 8 s windows, more on a busy
machine. Archives go to a temp folder (printed).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from quiet import add_quiet_args, require_quiet

from model_optimizer.recipe import load_recipe
from model_optimizer.search.tune import TuneConfig, TuneFlags, start_tune


def run(loaded, runs: Path, output: Path, flags: TuneFlags) -> tuple[dict, float]:
    """One tune into ``runs``; returns its summary.json (with its archive) and wall time."""
    started = time.monotonic()
    outcome = start_tune(loaded, runs, flags=flags, output=output)
    seconds = time.monotonic() - started
    summary = json.loads((outcome.archive / "summary.json").read_text())
    summary["archive"] = str(outcome.archive)
    for row in summary["trials"]:
        params = {name: row[name] for name in summary["space"]}
        note = (f" (level of launch #{row['launch']})" if row.get("scan_level")
                else f" (launch #{row['launch']})" if row.get("launch") is not None else "")
        print(f"  #{row['number']:>2} {params}: {row['status']:<7} objective "
              f"{row['objective'] or 0:7.2f} feasible {row['feasible']}{note}", flush=True)
    return summary, seconds


def qps_interval(archive: Path, row: dict) -> tuple[float | None, float | None]:
    """QPS and its 95% half-width from the first run of a trial row."""
    run_ids = (row.get("run_ids") or "").split()
    if not run_ids:
        return row.get("qps"), None
    metrics = json.loads((archive / "steps" / run_ids[0] / "metrics.json").read_text())
    interval = (metrics.get("intervals") or {}).get("qps") or {}
    return metrics.get("qps"), interval.get("half_width")


def window_noise(runs: Path) -> float | None:
    """Median relative 95% half-width of the QPS of every window archived under ``runs``."""
    widths = []
    for path in runs.rglob("metrics.json"):
        interval = (json.loads(path.read_text()).get("intervals") or {}).get("qps") or {}
        if interval.get("half_width") is not None and interval.get("value"):
            widths.append(interval["half_width"] / interval["value"])
    return statistics.median(widths) if widths else None


def params_of(row: dict, summary: dict) -> dict:
    """The tuned knobs of one row."""
    return {name: row[name] for name in summary["space"]}


def space_overrides(levels: list[int], second: str) -> list[str]:
    """``--set`` overrides of the benchmark's space (both knobs categorical: the grid)."""
    name, _, values = second.partition("=")
    return [f"tune.params={{max_num_seqs: {{type: categorical, choices: {levels}}}, "
            f"{name}: {{type: categorical, choices: [{values}]}}}}"]


def report(grid: dict, grid_s: float, tune: dict, tune_s: float, budget: int) -> None:
    """Print the comparison."""
    grid_archive = Path(grid["archive"])
    ok_rows = [r for r in grid["trials"] if r["feasible"]]
    grid_best = max(ok_rows, key=lambda r: r["objective"])
    best_qps, best_half = qps_interval(grid_archive, grid_best)
    print(f"\ngrid: {grid['launches']} launches, {grid['windows']} windows, "
          f"{grid_s / 60:.1f} min; best {params_of(grid_best, grid)}: {best_qps:.2f} ± "
          f"{best_half or 0:.2f} req/s")
    confirms = len(tune["confirmations"])
    chosen = tune["best_params"]
    print(f"tune: {tune['launches']} launches + {confirms} confirming, {tune['windows']} "
          f"windows, {tune_s / 60:.1f} min, budget {budget} trials; strategy: "
          f"{tune['strategy']}")
    if chosen is None:
        print(f"tune: no choice ({tune['reason']}): MISSED")
        return
    own = tune["confirmations"][-1]["figures"] if confirms else {}
    scanned = next(r["objective"] for r in tune["trials"] if r["number"] == tune["best"])
    print(f"tune's choice: {chosen}; scanned {scanned or 0:.2f}, its own launch "
          f"{own.get('qps') or 0:.2f} req/s")
    same = [r for r in grid["trials"] if params_of(r, grid) == chosen]
    noise = window_noise(grid_archive)
    print(f"noise: median 95% half-width of the grid's windows "
          f"{'-' if noise is None else f'{noise:.1%}'} of their QPS")
    print(f"launches: {(tune['launches'] + confirms) / grid['launches']:.0%} of the grid's "
          "(confirmation included)")
    if not same or not same[0]["objective"]:
        print("the grid did not measure tune's choice")
        return
    value = same[0]["objective"]
    inside = best_half is not None and value >= best_qps - best_half
    ratio = value / best_qps
    print(f"grid's own measurement of tune's choice: {value:.2f} req/s = {ratio:.1%} of the "
          f"grid's best; inside the grid's interval of its best: {'yes' if inside else 'no'}")
    print(f"goal (>= 95% or inside the interval): "
          f"{'met' if ratio >= 0.95 or inside else 'MISSED'}")


def main() -> None:
    """Run the grid and the scanning tune and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="recipes/tiny-cpu.yaml")
    parser.add_argument("--levels", default="1,2,4,8,16,32,64", help="max_num_seqs values")
    parser.add_argument("--second", default="block_size=32,64", help="KNOB=V1,V2,...")
    parser.add_argument("--budget", type=int, default=None,
                        help="tune's trial budget (default: half the grid's launches)")
    parser.add_argument("--duration", type=float, default=8.0, help="window (s)")
    parser.add_argument("--seed", type=int, default=0)
    add_quiet_args(parser)
    args = parser.parse_args()
    print(f"machine before: {require_quiet(args)}", flush=True)  # refuses when busy
    scratch = Path(tempfile.mkdtemp(prefix="mopt-bench-tune-"))
    recipe_copy = scratch / "recipe.yaml"
    shutil.copy(args.recipe, recipe_copy)
    text = recipe_copy.read_text().replace("../models/", str(Path("models").resolve()) + "/")
    recipe_copy.write_text(text)
    levels = [int(v) for v in args.levels.split(",")]
    loaded = load_recipe(recipe_copy, [f"workload.duration_s={args.duration}",
                                       "workload.num_requests=null",
                                       *space_overrides(levels, args.second)])
    grid_size = len(TuneConfig.from_recipe(loaded.resolved["tune"]).grid())
    budget = args.budget or max(1, grid_size // 2)
    print(f"grid: {grid_size} configurations, one launch each; {args.duration:g} s windows",
          flush=True)
    grid, grid_s = run(loaded, scratch / "grid", scratch / "grid.yaml",
                       TuneFlags(sampler="grid", n_trials=grid_size, strategy="relaunch"))
    print(f"tune: TPE scanning max_num_seqs, budget {budget} trials", flush=True)
    tune, tune_s = run(loaded, scratch / "tune", scratch / "tune.yaml",
                       TuneFlags(sampler="tpe", n_trials=budget, seed=args.seed, strategy="scan"))
    report(grid, grid_s, tune, tune_s, budget)
    print(f"archives: {scratch}")


if __name__ == "__main__":
    main()
