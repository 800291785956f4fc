"""A benchmark that measures the engine runs on an idle machine, and says how idle it was.

``machine_state`` reads the load average and, over a few seconds of ``/proc/stat``, how busy
the cores were and which other processes used them. ``require_quiet`` refuses to start when
the cores are busier than ``--max-busy`` (a share of all cores, default 0.25: half a core of
two) unless ``--allow-busy`` is given, which the figures then carry as ``busy_allowed``.
``apply``, ``sweep`` and ``tune`` record the load average in their archives
(``metrics.load_average``) and never refuse; only these scripts gate on it.

    from quiet import add_quiet_args, require_quiet
    state = require_quiet(args)            # exits 3 with the reason when the machine is busy
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import psutil

DEFAULT_MAX_BUSY = 0.25
EXIT_BUSY = 3


def _cpu_times() -> tuple[float, float]:
    with open("/proc/stat") as stat:
        fields = [float(x) for x in stat.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return sum(fields), idle


def machine_state(seconds: float = 3.0, skip: set[int] | None = None) -> dict[str, Any]:
    """Load averages, the cores' busy share over ``seconds``, and the busiest other
    processes (name, CPU % of one core) in that time."""
    skip = (skip or set()) | {os.getpid()}
    procs = {}
    for proc in psutil.process_iter(["pid", "name"]):
        if proc.info["pid"] in skip:
            continue
        try:
            proc.cpu_percent(None)
            procs[proc.info["pid"]] = proc
        except psutil.Error:
            continue
    total0, idle0 = _cpu_times()
    time.sleep(seconds)
    total1, idle1 = _cpu_times()
    busy = 1.0 - (idle1 - idle0) / max(total1 - total0, 1e-9)
    top = []
    for pid, proc in procs.items():
        try:
            share = proc.cpu_percent(None)
        except psutil.Error:
            continue
        if share >= 5.0:
            top.append({"pid": pid, "name": proc.info["name"], "cpu_pct": round(share, 1)})
    top.sort(key=lambda row: -row["cpu_pct"])
    return {"load_average": [round(x, 2) for x in os.getloadavg()], "busy_share": round(busy, 3),
            "cores": psutil.cpu_count(), "others": top[:5], "at": time.time()}


def add_quiet_args(parser: argparse.ArgumentParser) -> None:
    """``--allow-busy`` and ``--max-busy`` for a benchmark's command line."""
    parser.add_argument("--allow-busy", action="store_true",
                        help="measure even when other work keeps the cores busy (labelled)")
    parser.add_argument("--max-busy", type=float, default=DEFAULT_MAX_BUSY,
                        help="refuse above this busy share of all cores (default 0.25)")


def require_quiet(args: argparse.Namespace) -> dict[str, Any]:
    """The machine's state before a benchmark; exit when it is busy and not allowed."""
    state = machine_state()
    state["busy_allowed"] = bool(args.allow_busy)
    if state["busy_share"] > args.max_busy and not args.allow_busy:
        others = ", ".join(f"{o['name']} {o['cpu_pct']}%" for o in state["others"]) or "none"
        sys.stderr.write(
            f"refusing to benchmark: the cores were {state['busy_share']:.0%} busy over 3 s "
            f"(load average {state['load_average'][0]}; busiest others: {others}), above "
            f"--max-busy {args.max_busy:.0%}: a benchmark beside other work measures that "
            "work. Run it on an idle machine (or under the shared lock), or pass "
            "--allow-busy to measure anyway (the figures say so).\n")
        sys.exit(EXIT_BUSY)
    return state
