"""How long does `mopt apply` take to exit after Ctrl-C, and does it leave vLLM behind?

Starts the real `mopt apply recipes/tiny-cpu.yaml` (vLLM CPU server, tiny local model) and
sends SIGINT at points spread over the server's startup (``--delays``, seconds after mopt
started) and once the load test runs (``load``: as soon as mopt prints that it runs). For
each it prints the seconds from SIGINT to mopt's exit, the exit code (130 expected), the
archive's status (``interrupted`` expected) and whether any process of the server's group
(the pid in ``status.json``) is still alive after mopt exited (``left`` must be 0).

Startup phases differ: while vLLM's API server waits for its engine core it does not act on
SIGTERM (docs/design.md section 4), so those points show the supervisor's startup grace.

    .venv/bin/python benchmarks/interrupt_latency.py [--repeats 2] [--delays 3,8,13,18]

About 40 s per point on 2 cores. Archives go to a temp folder.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes" / "tiny-cpu.yaml"
LOAD_LINE = "load test running"


def group_alive(pgid: int) -> int:
    """Live, non-zombie processes of group ``pgid``."""
    count = 0
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                count += 1
        except (psutil.Error, OSError):
            continue
    return count


def interrupt_at(point: str, runs: Path, log: Path) -> dict:
    """One `mopt apply`, interrupted at ``point``: seconds, or ``load``."""
    with open(log, "w") as out:
        proc = subprocess.Popen(  # noqa: S603 - argv list
            [sys.executable, "-m", "model_optimizer", "apply", str(RECIPE),
             "--runs-dir", str(runs)], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        started = time.monotonic()
        while proc.poll() is None:
            elapsed = time.monotonic() - started
            if (point == "load" and LOAD_LINE in log.read_text()) or \
                    (point != "load" and elapsed >= float(point)):
                break
            time.sleep(0.1)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            code = proc.wait(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = None
        exit_s = time.monotonic() - sent
    archives = [p for p in runs.iterdir() if p.is_dir()] if runs.exists() else []
    status = json.loads((archives[0] / "status.json").read_text()) if archives else \
        {"status": "no archive yet"}  # interrupted before a server could start
    pid = status.get("server_pid")
    return {"point": point, "at_s": round(sent - started, 1), "exit_s": round(exit_s, 1),
            "code": code, "status": status["status"], "left": group_alive(pid) if pid else 0}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--delays", default="3,8,13,18")
    args = parser.parse_args()
    points = [*args.delays.split(","), "load"]
    results: dict[str, list[dict]] = {point: [] for point in points}
    with tempfile.TemporaryDirectory(prefix="mopt-interrupt-") as scratch:
        for repeat in range(args.repeats):
            for point in points:
                folder = Path(scratch) / f"{repeat}-{point}"
                folder.mkdir()
                row = interrupt_at(point, folder / "runs", folder / "mopt.log")
                results[point].append(row)
                print(json.dumps(row), flush=True)
    print("\npoint   sent at (s)   exit after SIGINT (s): median [min, max]   codes   left")
    for point, rows in results.items():
        exits = [r["exit_s"] for r in rows]
        print(f"{point:>5}   {statistics.median(r['at_s'] for r in rows):>11.1f}   "
              f"{statistics.median(exits):>6.1f} [{min(exits):.1f}, {max(exits):.1f}]"
              f"{'':>22}{sorted({r['code'] for r in rows})}   {sum(r['left'] for r in rows)}")


if __name__ == "__main__":
    main()
