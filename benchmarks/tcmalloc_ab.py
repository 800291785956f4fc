"""tcmalloc or not on vLLM's CPU engine, launch against launch (issue 20).

vLLM's CPU guide recommends preloading tcmalloc; its worker says so at every start
("libtcmalloc is not found in LD_PRELOAD"). A preload only acts at a launch, so the two arms
are separate launches of the same recipe (``hardware.placement: auto``), in alternating order
(A B, B A, ...) so slow drift of the machine falls on both: each launch measures ``--windows``
steady-state windows of mopt's closed-loop load at ``--concurrency``. The tcmalloc arm serves
with ``engine.env.LD_PRELOAD`` through the recipe's ``engine.allow_code`` gate.

Per arm: every window, the median with a 95% bootstrap interval, the CV; then the ratio of
the medians (tcmalloc / plain) with a 95% bootstrap interval over windows, and its verdict
(an interval that holds 1.0 is "no difference shown").

    flock /tmp/mopt-engine.lock .venv/bin/python benchmarks/tcmalloc_ab.py \\
        [--pairs 2] [--windows 4] [--concurrency 16] [--duration 8]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from pathlib import Path

import numpy as np
from quiet import add_quiet_args, require_quiet
from quiet_test_bed import bootstrap, cv

from model_optimizer.engine.factory import plan_server
from model_optimizer.engine.placement import client_placed, resolve_placement
from model_optimizer.recipe import load_recipe
from model_optimizer.runner import bench_endpoint, check_model_present

TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"


def launch_windows(recipe: Path, sets: list[str], args, scratch: Path) -> tuple[float, list]:
    """Launch once with ``sets``; (seconds to healthy, req/s of each window)."""
    loaded = load_recipe(recipe, sets)
    placement = resolve_placement(loaded.spec)
    tokenizer = check_model_present(loaded)
    engine = plan_server(loaded).process(scratch / f"engine-{len(os.listdir(scratch))}.log")
    values = []
    with engine:
        ready = engine.wait_ready()
        for _ in range(args.windows):
            with client_placed(placement):
                outcome = bench_endpoint(engine.base_url, loaded, loaded.spec.model.served_name,
                                         tokenizer, scratch / "runs")
            values.append(float(outcome.metrics.get("qps") or 0.0))
    return ready, values


def ratio_interval(plain: list[float], preloaded: list[float], draws: int = 2000
                   ) -> tuple[float, float]:
    """95% bootstrap interval of median(preloaded) / median(plain), windows resampled."""
    rng = np.random.default_rng(0)
    a, b = np.asarray(plain), np.asarray(preloaded)
    found = [np.median(rng.choice(b, len(b))) / np.median(rng.choice(a, len(a)))
             for _ in range(draws)]
    return float(np.percentile(found, 2.5)), float(np.percentile(found, 97.5))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="recipes/tiny-cpu.yaml")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--windows", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration", type=float, default=8.0)
    parser.add_argument("--library", default=TCMALLOC)
    add_quiet_args(parser)
    args = parser.parse_args()
    print(f"machine before: {require_quiet(args)}", flush=True)  # refuses when busy
    if not Path(args.library).is_file():
        raise SystemExit(f"{args.library} is missing: apt-get install libtcmalloc-minimal4")
    base = [f"engine.max_num_seqs={args.concurrency}", f"workload.duration_s={args.duration}",
            "workload.num_requests=null", "engine.startup_timeout_s=540"]
    arms = {"plain": base, "tcmalloc": [*base, f"engine.env.LD_PRELOAD={args.library}",
                                        "engine.allow_code=[LD_PRELOAD]"]}
    windows: dict[str, list[float]] = {name: [] for name in arms}
    scratch = Path(tempfile.mkdtemp(prefix="mopt-tcmalloc-"))
    print(f"load average {os.getloadavg()}", flush=True)
    for pair in range(args.pairs):
        order = list(arms) if pair % 2 == 0 else list(arms)[::-1]
        for name in order:
            ready, values = launch_windows(Path(args.recipe).resolve(), arms[name], args,
                                           scratch)
            windows[name] += values
            print(f"pair {pair} {name:<8} healthy after {ready:.0f} s: "
                  f"{', '.join(f'{v:.2f}' for v in values)} req/s "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
    for name, values in windows.items():
        low, high = bootstrap(values, np.median)
        print(f"{name:<8} median {statistics.median(values):.2f} [{low:.2f}, {high:.2f}] req/s, "
              f"CV {cv(values):.1%}, {len(values)} windows")
    low, high = ratio_interval(windows["plain"], windows["tcmalloc"])
    ratio = statistics.median(windows["tcmalloc"]) / statistics.median(windows["plain"])
    verdict = "no difference shown" if low <= 1.0 <= high else (
        "tcmalloc faster" if low > 1.0 else "tcmalloc slower")
    print(f"tcmalloc / plain: {ratio:.3f} [{low:.3f}, {high:.3f}]: {verdict}")
    print(f"load average after {os.getloadavg()}; logs in {scratch}")


if __name__ == "__main__":
    main()
