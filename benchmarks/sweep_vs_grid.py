"""Grid vs sweep, judged honestly: a repeated grid saved to a file, and each sweep's verdict.

Three commands, each small enough for one hold of the engine lock (run each under
``flock /tmp/mopt-engine.lock``):

    # the grid: one launch per (value, pass); passes go up then down; each launch is saved
    # to the grid file at once, and a (value, pass) already there is skipped (resumable)
    .venv/bin/python benchmarks/sweep_vs_grid.py grid --workload default \\
        --values 1,2,4,8 --passes up --grid docs/benchmarks/grids/default.json
    # a sweep (auto: the shipped default; probe-fit, probe-scan or relaunch), judged against
    # that grid file, no launch for the judge
    .venv/bin/python benchmarks/sweep_vs_grid.py sweep --workload default \\
        --strategy auto --grid docs/benchmarks/grids/default.json
    # the grid's table, or a verdict on any chosen value
    .venv/bin/python benchmarks/sweep_vs_grid.py judge --grid FILE [--chosen 48 --unresolved]

Workloads: ``default`` is recipes/tiny-cpu.yaml as shipped (64/32 tokens: its throughput
rises to the top of 1..64); ``kv-knee`` gives vLLM 24 KV blocks of 32 tokens
(``num-gpu-blocks-override``): 8 requests of 96 tokens fit, more are preempted, so the best
valid value lies inside the range. Windows are steady-state (``--duration`` s, concurrency =
max_num_seqs). The judge and its verdicts are ``benchmarks/grid_judge.py``; the verdict line
names the sweep strategy's git revision.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from quiet import add_quiet_args, require_quiet

from model_optimizer.recipe import load_recipe
from model_optimizer.runner import run_recipe
from model_optimizer.search.sweep.flags import SweepFlags
from model_optimizer.search.sweep.loop import start_sweep

try:
    from benchmarks.grid_judge import grid_table, judge, load_grid, save_grid, sweep_unresolved
except ModuleNotFoundError:  # run as a script: benchmarks/ itself is on sys.path
    from grid_judge import grid_table, judge, load_grid, save_grid, sweep_unresolved

GRID = (1, 2, 4, 8, 16, 32, 64)
WORKLOADS = {
    "default": [],
    "kv-knee": ["engine.extra_args={num-gpu-blocks-override: 24}"],
}
STRATEGIES = {
    # what a user gets from `mopt sweep --start 1 --max 64` (sweep.strategy auto, defaults)
    "auto": ([], SweepFlags(start=1, max=64)),
    "probe-fit": ([], SweepFlags(start=1, max=64, strategy="probe-fit")),
    "probe-scan": (["sweep.resolution=4", "sweep.remeasure_rounds=2"],
                   SweepFlags(start=1, max=64, strategy="probe-scan")),
    "relaunch": (["sweep.resolution=48", "sweep.max_launches=4", "sweep.remeasure_rounds=1",
                  "sweep.confirm_duration_s=0"],
                 SweepFlags(start=4, growth=4, max=64, strategy="relaunch")),
}


def recipe_sets(workload: str, duration: float) -> list[str]:
    """The --set overrides of a workload with steady-state windows of ``duration`` s."""
    return [*WORKLOADS[workload], f"workload.duration_s={duration}",
            "workload.num_requests=null", "workload.concurrency=null",
            "sweep.max_launches=12", f"sweep.confirm_duration_s={duration}",
            "engine.startup_timeout_s=540"]


def loaded_recipe(recipe: str, sets: list[str]):
    """The recipe with ``sets`` applied, its model path made absolute."""
    return load_recipe(Path(recipe).resolve(), sets)


def strategy_revision() -> str:
    """The last commit that touched the sweep strategy code (and whether it is modified)."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], capture_output=True, text=True).stdout.strip()
    code = ("model_optimizer/search/sweep", "model_optimizer/search/core")
    revision = git("log", "-1", "--format=%h", "--", *code)
    dirty = git("status", "--porcelain", "--", *code)
    return revision + ("+modified" if dirty else "")


def measure_grid(args) -> None:
    """One launch per (value, pass) not yet in the grid file, saved after each."""
    path = Path(args.grid)
    grid = load_grid(path)
    sets = recipe_sets(args.workload, args.duration)
    grid.update(workload=args.workload, recipe_sets=sets, duration_s=args.duration)
    loaded = loaded_recipe(args.recipe, sets)
    values = [int(v) for v in args.values.split(",")]
    runs = Path(tempfile.mkdtemp(prefix="mopt-grid-"))
    for name in args.passes.split(","):
        for value in values if name == "up" else reversed(values):
            if any(r["value"] == value and r["pass"] == name for r in grid["measurements"]):
                continue
            varied = loaded.varied({"engine.max_num_seqs": value,
                                    "workload.concurrency": value}, f"grid value {value}")
            outcome = run_recipe(varied, runs)
            half = ((outcome.metrics or {}).get("intervals") or {}).get("qps") or {}
            row = {"value": value, "pass": name, "ok": outcome.ok,
                   "qps": (outcome.metrics or {}).get("qps"),
                   "half_width": half.get("half_width"), "slo_met": outcome.slo_met,
                   "preemptions": (outcome.telemetry_peaks or {}).get("preemptions"),
                   "load_avg": round(os.getloadavg()[0], 2), "at": time.strftime("%H:%M:%S")}
            grid["measurements"].append(row)
            save_grid(path, grid)
            print(json.dumps(row), flush=True)
    print(grid_table(grid))


def run_sweep(args) -> None:
    """One sweep of ``args.strategy`` on the workload, then its verdict against the grid."""
    grid = load_grid(Path(args.grid))
    extra, flags = STRATEGIES[args.strategy]
    loaded = loaded_recipe(args.recipe, [*recipe_sets(args.workload, args.duration), *extra])
    scratch = Path(tempfile.mkdtemp(prefix="mopt-sweep-"))
    started, load_before = time.monotonic(), os.getloadavg()
    outcome = start_sweep(loaded, scratch / "runs", flags=flags, output=scratch / "out.yaml")
    summary = json.loads((outcome.archive / "summary.json").read_text())
    for row in summary["steps"]:
        print(f"  {row['phase']:<9} {row['value']:>4}: {row.get('qps') or 0:7.2f} req/s "
              f"({row['status']})", flush=True)
    chosen = (summary.get("chosen") or {}).get("value")
    unresolved = sweep_unresolved(summary, loaded.spec.sweep.plateau_threshold)
    verdict = judge(grid, int(chosen) if chosen is not None else None, unresolved)
    print(f"{args.strategy} on {args.workload} (strategy code {strategy_revision()}): "
          f"{summary['launches']} launches, {(time.monotonic() - started) / 60:.1f} min, "
          f"noise {summary.get('noise')}, sweep says "
          f"{'not resolved' if unresolved else 'resolved'}; load average "
          f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
    print(verdict.line() if verdict else "the grid has no valid value yet")
    print(f"archives: {scratch}")


def show_judge(args) -> None:
    """The grid's table and, with --chosen, a verdict."""
    grid = load_grid(Path(args.grid))
    print(grid_table(grid))
    if args.chosen is not None:
        verdict = judge(grid, args.chosen, args.unresolved)
        print(verdict.line() if verdict else "the grid has no valid value yet")


def main() -> None:
    """Parse the command and run it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["grid", "sweep", "judge"])
    parser.add_argument("--grid", required=True, help="the grid's JSON file")
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="default")
    parser.add_argument("--recipe", default="recipes/tiny-cpu.yaml")
    parser.add_argument("--duration", type=float, default=10.0, help="window (s)")
    parser.add_argument("--values", default=",".join(map(str, GRID)))
    parser.add_argument("--passes", default="up,down", help="up, down or up,down")
    parser.add_argument("--strategy", choices=sorted(STRATEGIES), default="auto")
    parser.add_argument("--chosen", type=int, default=None)
    parser.add_argument("--unresolved", action="store_true",
                        help="judge: the sweep said its choice is not resolved")
    add_quiet_args(parser)
    args = parser.parse_args()
    print(f"machine before: {require_quiet(args)}", flush=True)  # refuses when busy
    {"grid": measure_grid, "sweep": run_sweep, "judge": show_judge}[args.command](args)


if __name__ == "__main__":
    main()
