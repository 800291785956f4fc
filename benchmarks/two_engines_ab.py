"""Two vLLM CPU servers at once on 2 cores (what CI's two integration workers do): both
engines on the same core (plain `auto`) against mirrored placements (the second `mopt apply`
with ``VLLM_CPU_OMP_THREADS_BIND`` set to the other core, which `auto` follows).

Each pair starts two `mopt apply recipes/tiny-cpu.yaml` at the same moment; the pairs
alternate same/mirrored so drift falls on both. Printed per pair: each apply's wall time
(launch + load) and req/s; at the end the medians per arrangement. Run under the engine lock:

    flock /tmp/mopt-engine.lock .venv/bin/python benchmarks/two_engines_ab.py --pairs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from quiet import add_quiet_args, require_quiet

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes" / "tiny-cpu.yaml"


def one_pair(mirrored: bool, runs: Path) -> list[tuple[float, float]]:
    """Start two applies together; (wall seconds, req/s) of each."""
    procs = []
    for index in range(2):
        env = dict(os.environ)
        env.pop("VLLM_CPU_OMP_THREADS_BIND", None)
        if mirrored and index == 1:
            env["VLLM_CPU_OMP_THREADS_BIND"] = str(sorted(os.sched_getaffinity(0))[-1])
        argv = [sys.executable, "-m", "model_optimizer", "apply", str(RECIPE), "--json",
                "--runs-dir", str(runs / f"{time.time_ns()}-{index}")]
        procs.append((time.monotonic(), subprocess.Popen(
            argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)))
    ended: dict[int, float] = {}
    while len(ended) < len(procs):  # each one's own end, not the later of the two
        for index, (_, proc) in enumerate(procs):
            if index not in ended and proc.poll() is not None:
                ended[index] = time.monotonic()
        time.sleep(0.2)
    out = []
    for index, (started, proc) in enumerate(procs):
        stdout = proc.stdout.read()
        qps = json.loads(stdout)["metrics"]["qps"] if proc.returncode == 0 else float("nan")
        out.append((ended[index] - started, qps))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=3, help="pairs per arrangement")
    add_quiet_args(parser)
    args = parser.parse_args()
    print(f"machine before: {require_quiet(args)}", flush=True)  # refuses when busy
    results: dict[str, list[tuple[float, float]]] = {"same core": [], "mirrored": []}
    with tempfile.TemporaryDirectory() as folder:
        for index in range(2 * args.pairs):
            name = "same core" if index % 2 == 0 else "mirrored"
            pair = one_pair(name == "mirrored", Path(folder))
            results[name].extend(pair)
            print(f"{name:9s} pair {index // 2 + 1}: " + ", ".join(
                f"{wall:.0f} s / {qps:.2f} req/s" for wall, qps in pair), flush=True)
    for name, rows in results.items():
        walls, rates = [w for w, _ in rows], [q for _, q in rows]
        print(f"{name:9s}: wall median {statistics.median(walls):.0f} s "
              f"(range {min(walls):.0f}-{max(walls):.0f}), req/s median "
              f"{statistics.median(rates):.2f} (range {min(rates):.2f}-{max(rates):.2f})")


if __name__ == "__main__":
    main()
