"""Window noise with and without process placement, on the same vLLM CPU server (issue 20).

One tiny server is launched unplaced (``hardware.placement: none``). Then, in alternating
blocks, consecutive steady-state windows of mopt's closed-loop load (``--duration`` s each,
concurrency c) are measured either *unplaced* (API server, engine core and client on every
core) or *placed* (what ``placement: auto`` does: API server and client on the core vLLM
reserves, the engine core beside vLLM's worker, which keeps its own OpenMP binding),
switched between blocks with ``os.sched_setaffinity``. The block order alternates so slow
drift falls on both sides.

``--arms unplaced,auto,float,old-auto`` adds the earlier ``auto``s: ``float`` (until
2026-12-05: the engine core floating) and ``old-auto`` (until 2026-12-03: the API server and
vLLM's engine core on the reserved core).

Per (concurrency, placement): the windows in time order, the median with a 95% bootstrap
interval, and the coefficient of variation (CV) with a 95% bootstrap interval.
``--ld-preload LIB`` serves with that library preloaded (``engine.allow_code: [LD_PRELOAD]``),
e.g. ``/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4``.

    flock /work/cpu.lock .venv/bin/python benchmarks/quiet_test_bed.py \\
        [--concurrency 16,64] [--blocks 2] [--windows 3] [--duration 10] [--allow-busy]

It refuses to start on a busy machine (``quiet.require_quiet``) and prints the machine's
state (load average, busy share, the busiest other processes) before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quiet import add_quiet_args, machine_state, require_quiet  # noqa: E402

from model_optimizer.engine.factory import plan_server  # noqa: E402
from model_optimizer.engine.placement import (
    Placement,
    client_placed,
    is_worker,
    pin_threads,
    place_server,
    resolve_placement,
)
from model_optimizer.recipe import load_recipe
from model_optimizer.recipe.placement_rules import machine_cores
from model_optimizer.runner import bench_endpoint, check_model_present


def bootstrap(values: list[float], stat, draws: int = 2000, seed: int = 0) -> tuple[float, float]:
    """A 95% percentile-bootstrap interval of ``stat`` over ``values``."""
    rng = np.random.default_rng(seed)
    data = np.asarray(values)
    found = [stat(rng.choice(data, size=len(data))) for _ in range(draws)]
    return float(np.percentile(found, 2.5)), float(np.percentile(found, 97.5))


def cv(values) -> float:
    """Coefficient of variation (sample standard deviation / mean)."""
    values = list(values)
    return statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else 0.0


def unplace(server_pid: int) -> None:
    """Every core for the API server and its non-worker descendants (as launched)."""
    cores = machine_cores()
    pin_threads(server_pid, cores)
    for child in psutil.Process(server_pid).children(recursive=True):
        if not is_worker(child):
            pin_threads(child.pid, cores)


def window(url: str, loaded, runs: Path, concurrency: int, placement: Placement | None,
           tokenizer: str) -> float:
    """One steady-state window's req/s, the client placed by ``placement``."""
    probe = load_recipe(loaded.path, [*loaded.overrides, f"workload.concurrency={concurrency}"])
    with client_placed(placement):
        outcome = bench_endpoint(url, probe, probe.spec.model.served_name, tokenizer, runs)
    return float(outcome.metrics.get("qps") or 0.0)


ARMS = ("unplaced", "auto", "float", "old-auto")


def place_arm(arm: str, server_pid: int, placed: Placement) -> None:
    """``unplaced``: every core; ``auto``: what ``hardware.placement: auto`` does
    (``place_server``: the API server on the reserved core, the engine core beside the
    worker); ``float``: what it did until 2026-12-05 (the engine core floating);
    ``old-auto``: what it did until 2026-12-03 (the API server and the engine core, every
    process but the worker, on the reserved core)."""
    unplace(server_pid)
    if arm == "auto":
        place_server(placed, server_pid)
    elif arm == "float":
        pin_threads(server_pid, placed.server)
    elif arm == "old-auto":
        pin_threads(server_pid, placed.server)
        for child in psutil.Process(server_pid).children(recursive=True):
            if not is_worker(child):
                pin_threads(child.pid, placed.server)


def block_order(arms: list[str], blocks: int) -> list[str]:
    """Blocks per arm in a mirrored order (A B C, C B A, ...) so drift falls on every arm."""
    rounds = [arms if r % 2 == 0 else arms[::-1] for r in range(blocks)]
    return [arm for one in rounds for arm in one]


def measure(engine, loaded, runs: Path, args, placed: Placement) -> dict:
    """Mirrored blocks per concurrency; the windows of each arm."""
    tokenizer = check_model_present(loaded)
    result: dict = {}
    for concurrency in args.concurrency:
        series: dict[str, list[float]] = {arm: [] for arm in args.arms}
        for block, arm in enumerate(block_order(args.arms, args.blocks)):
            place_arm(arm, engine.pid, placed)
            for _ in range(args.windows):
                qps = window(engine.base_url, loaded, runs, concurrency,
                             None if arm == "unplaced" else placed, tokenizer)
                series[arm].append(qps)
                print(f"c={concurrency:<3} block {block} {arm:<11} {qps:7.2f} req/s "
                      f"(load {os.getloadavg()[0]:.1f})", flush=True)
        result[concurrency] = series
    return result


def report(result: dict) -> None:
    """One line per (concurrency, placement): windows, median [CI], CV [CI]."""
    for concurrency, series in result.items():
        for mode, values in series.items():
            low, high = bootstrap(values, np.median)
            cv_low, cv_high = bootstrap(values, cv)
            print(f"c={concurrency} {mode:<8} windows {', '.join(f'{v:.1f}' for v in values)}"
                  f" | median {statistics.median(values):.1f} [{low:.1f}, {high:.1f}]"
                  f" | CV {cv(values):.1%} [{cv_low:.1%}, {cv_high:.1%}]", flush=True)


def main() -> None:
    """Launch once, measure alternating blocks, print the table and the load average."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="recipes/tiny-cpu.yaml")
    parser.add_argument("--concurrency", default="16,64")
    parser.add_argument("--blocks", type=int, default=2, help="blocks per placement")
    parser.add_argument("--windows", type=int, default=3, help="windows per block")
    parser.add_argument("--duration", type=float, default=10.0)
    parser.add_argument("--ld-preload", default=None)
    parser.add_argument("--arms", default="unplaced,auto",
                        help=f"comma-separated, of {', '.join(ARMS)}")
    add_quiet_args(parser)
    args = parser.parse_args()
    print(f"machine before: {json.dumps(require_quiet(args))}", flush=True)
    args.concurrency = [int(v) for v in args.concurrency.split(",")]
    args.arms = [arm for arm in args.arms.split(",") if arm]
    if not args.arms or set(args.arms) - set(ARMS):
        parser.error(f"--arms takes {', '.join(ARMS)}")
    scratch = Path(tempfile.mkdtemp(prefix="mopt-quiet-"))
    sets = ["hardware.placement=none", f"engine.max_num_seqs={max(args.concurrency)}",
            f"workload.duration_s={args.duration}", "workload.num_requests=null",
            "engine.startup_timeout_s=540", "workload.warmup_steady_max_s=null"]
    if args.ld_preload:
        sets += [f"engine.env.LD_PRELOAD={args.ld_preload}", "engine.allow_code=[LD_PRELOAD]"]
    loaded = load_recipe(Path(args.recipe).resolve(), sets)
    placed = resolve_placement(load_recipe(loaded.path, [*sets[1:]]).spec)
    print(f"placed = {placed.describe()}; load average {os.getloadavg()}", flush=True)
    engine = plan_server(loaded).process(scratch / "engine.log")
    with engine:
        print(f"ready after {engine.wait_ready():.0f} s", flush=True)
        result = measure(engine, loaded, scratch / "runs", args, placed)
    report(result)
    print(f"machine after: {json.dumps(machine_state(seconds=1.0))}")
    (scratch / "windows.json").write_text(json.dumps(result, indent=1))
    print(f"windows: {scratch / 'windows.json'}")
    shutil.rmtree(scratch / "runs", ignore_errors=True)


if __name__ == "__main__":
    main()
