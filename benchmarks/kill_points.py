"""Is anything of vLLM left when mopt is killed at any moment of a run, and for how long?

Starts the real ``mopt apply recipes/tiny-cpu.yaml`` (vLLM CPU build, tiny local model, a
10 s load) and sends SIGKILL or SIGTERM to mopt at one of ten points (``POINTS``, in the
order a run passes them), seen from the server's log, its processes and the archive:

    api_up          the API server parsed its arguments (it starts its engine core next)
    core_spawned    the engine core process exists (still importing)
    core_init       the engine core initialises (its first log line)
    worker_spawned  the engine core's worker process exists (still importing)
    loading         the worker loads the model
    kv_cache        the KV cache is sized (profile and warm-up follow)
    healthy         the server answers (``Application startup complete``)
    load_early      3 requests measured
    load_late       6 s into the 10 s load
    shutdown        mopt is stopping the server (vLLM logs ``[shutdown]``)

For each trial it prints one JSON line: the server's processes at the kill (the server's are
those whose environment names the archive or whose stdout is its ``engine.log``: vLLM's engine
core and worker overwrite their environment, ``model_optimizer/reaper.py``), how many were
still alive 15 s after the signal (the goal: 0), the seconds until the last one was gone
(polled every 0.2 s, up to ``--wait``), and the 1-minute load average before the trial and
at the kill. Leftovers are killed by hand after ``--wait`` so trials stay independent. No
``mopt`` command runs after the kill: what is gone, mopt's watchdog (or mopt itself, on
SIGTERM) did.

    flock /work/cpu.lock python benchmarks/kill_points.py --repeats 3 [--signals KILL,TERM]
        [--points api_up,healthy] [--code /path/to/another/checkout] [--burn 2] > trials.jsonl

About 45 s per trial on 2 idle cores. Archives go to a temp folder.
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
import uuid
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from model_optimizer.reaper import server_processes  # noqa: E402

RECIPE = ROOT / "recipes" / "tiny-cpu.yaml"
MARK = "MOPT_KILL_POINTS_TRIAL"
ALIVE_AFTER_S = 15.0


def _log(archive: Path | None) -> str:
    try:
        return (archive / "engine.log").read_text(errors="replace") if archive else ""
    except OSError:
        return ""


def _titled(procs: list[psutil.Process], prefix: str) -> list[psutil.Process]:
    found = []
    for proc in procs:
        try:
            if " ".join(proc.cmdline()).startswith(prefix):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def _children_of(procs: list[psutil.Process], parents: list[psutil.Process]) -> bool:
    pids = {p.pid for p in parents}
    for proc in procs:
        try:
            if proc.ppid() in pids:
                return True
        except psutil.Error:
            continue
    return False


def _measured(archive: Path) -> int:
    try:
        lines = (archive / "requests.jsonl").read_text().splitlines()
    except OSError:
        return 0
    return sum('"warmup": false' in line for line in lines)


def reached(point: str, archive: Path, procs: list[psutil.Process], load_since: float | None
            ) -> bool:
    """True once the run is at ``point`` (see the module docstring)."""
    log = _log(archive)
    cores = _titled(procs, "VLLM::EngineCore")
    api = [p for p in procs if p not in cores and not _titled([p], "VLLM::")]
    checks = {
        "api_up": lambda: "non-default args" in log,
        "core_spawned": lambda: any(
            "multiprocessing.spawn" in " ".join(p.cmdline()) for p in api) or bool(cores),
        "core_init": lambda: "(EngineCore pid=" in log,
        "worker_spawned": lambda: _children_of(procs, cores),
        "loading": lambda: "Starting to load model" in log,
        "kv_cache": lambda: "KV cache size" in log,
        "healthy": lambda: "Application startup complete" in log,
        "load_early": lambda: _measured(archive) >= 3,
        "load_late": lambda: load_since is not None and time.monotonic() - load_since >= 6,
        "shutdown": lambda: "[shutdown]" in log,
    }
    try:
        return checks[point]()
    except psutil.Error:
        return False


POINTS = ("api_up", "core_spawned", "core_init", "worker_spawned", "loading", "kv_cache",
          "healthy", "load_early", "load_late", "shutdown")


def _server(archive: Path | None, mark: str) -> list[psutil.Process]:
    """The server's live processes: proven by the archive (tag or log), or by our mark."""
    found = {p.pid: p for p in (server_processes(archive) if archive else [])}
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get(MARK) == mark and "vllm" in " ".join(proc.cmdline()):
                found.setdefault(proc.pid, proc)
        except psutil.Error:
            continue
    return [p for p in found.values() if _running(p)]


def _tree(mopt: int) -> list[psutil.Process]:
    """mopt's descendants but its watchdog: the server's processes while mopt lives (cheap
    enough to poll without slowing the start-up being measured)."""
    try:
        children = psutil.Process(mopt).children(recursive=True)
    except psutil.Error:
        return []
    return [p for p in children if _running(p) and not _titled([p], sys.executable + " -I -S")]


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _archive(runs: Path) -> Path | None:
    logs = sorted(runs.rglob("engine.log")) if runs.exists() else []
    return logs[0].parent if logs else None


def trial(point: str, sig: signal.Signals, wait_s: float, code: Path = ROOT) -> dict:
    """One ``mopt apply`` (mopt's code from ``code``) killed by ``sig`` at ``point``."""
    load_before, mark = os.getloadavg()[0], uuid.uuid4().hex
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        mopt = subprocess.Popen(  # noqa: S603 - argv list
            [sys.executable, "-m", "model_optimizer", "apply", str(RECIPE), "--runs-dir",
             str(runs), "--set", "workload.duration_s=10"], cwd=code,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            env={**os.environ, "PYTHONPATH": str(code), MARK: mark})
        archive, load_since, seen = None, None, {}
        try:
            while mopt.poll() is None:
                archive = archive or _archive(runs)
                procs = _tree(mopt.pid)
                seen.update({p.pid: p for p in procs})
                if load_since is None and archive and (archive / "requests.jsonl").exists():
                    load_since = time.monotonic()
                if archive and reached(point, archive, procs, load_since):
                    break
                time.sleep(0.1)
            else:
                return {"point": point, "signal": sig.name, "error": "mopt ended first",
                        "returncode": mopt.returncode}
            names = sorted(_name(p) for p in procs)
            mopt.send_signal(sig)
            killed, load_at_kill = time.monotonic(), os.getloadavg()[0]
            alive_at, last_gone = None, None
            while time.monotonic() - killed < wait_s:
                seen.update({p.pid: p for p in _server(archive, mark)})
                left = [p for p in seen.values() if _running(p)]
                elapsed = time.monotonic() - killed
                if left:
                    last_gone = None
                elif last_gone is None:
                    last_gone = elapsed
                if elapsed >= ALIVE_AFTER_S and alive_at is None:
                    alive_at = len(left)
                if last_gone is not None and (alive_at is not None or elapsed > last_gone + 1):
                    break  # all gone, and nothing can start again: a dead tree spawns nothing
                time.sleep(0.2)
            left = [p for p in seen.values() if _running(p)]
            for proc in left:  # by hand, so the next trial starts clean
                proc.kill()
            return {"point": point, "signal": sig.name, "at_kill": names,
                    "alive_after_15s": alive_at if alive_at is not None else len(left),
                    "gone_after_s": round(last_gone, 2) if last_gone is not None else None,
                    "killed_by_hand": len(left), "load_before": round(load_before, 2),
                    "load_at_kill": round(load_at_kill, 2),
                    "watchdog_line": "[mopt watchdog" in _log(archive)}
        finally:
            mopt.kill()
            mopt.wait()


def _name(proc: psutil.Process) -> str:
    try:
        text = " ".join(proc.cmdline())
    except psutil.Error:
        return "gone"
    for name, marker in (("core", "VLLM::EngineCore"), ("worker", "VLLM::Worker"),
                         ("tracker", "resource_tracker"), ("spawn", "multiprocessing.spawn"),
                         ("api", "vllm.entrypoints")):
        if marker in text:
            return name
    return text[:30]


def _cell(rows: list[dict]) -> str:
    if not rows:
        return "-"
    left = [r.get("alive_after_15s", 1) for r in rows]  # an error counts as a failure
    alive = sum(count > 0 for count in left)
    processes = f" ({sum(left)} processes)" if alive else ""
    gone = sorted(r["gone_after_s"] for r in rows if r.get("gone_after_s") is not None)
    times = f"{statistics.median(gone):.1f} ({gone[0]:.1f}-{gone[-1]:.1f})" if gone else "never"
    return f"{alive} of {len(rows)}{processes}; {times} s"


def summary(rows: list[dict]) -> str:
    """A markdown table: per point and signal, trials with a process alive 15 s after the
    signal, and the median (range) seconds until the last one was gone."""
    lines = ["| point | SIGKILL: trials with a process left at 15 s; all gone after | SIGTERM |",
             "|---|---|---|"]
    for point in POINTS:
        cells = [_cell([r for r in rows if r.get("point") == point and r.get("signal") == name])
                 for name in ("SIGKILL", "SIGTERM")]
        if cells != ["-", "-"]:
            lines.append(f"| {point} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main() -> None:
    """Parse the flags; run every point for every signal, ``--repeats`` times."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--signals", default="KILL,TERM")
    parser.add_argument("--points", default=",".join(POINTS))
    parser.add_argument("--wait", type=float, default=60.0)
    parser.add_argument("--code", type=Path, default=ROOT,
                        help="run mopt from this checkout (a before/after comparison)")
    parser.add_argument("--burn", type=int, default=0,
                        help="busy-loop processes beside the runs (other work, as in issue 37)")
    parser.add_argument("--summarize", type=Path, help="only print the table of a JSONL file")
    args = parser.parse_args()
    if args.summarize:
        print(summary([json.loads(line) for line in args.summarize.read_text().splitlines()]))
        return
    points = args.points.split(",")
    unknown = set(points) - set(POINTS)
    if unknown:
        parser.error(f"unknown points {sorted(unknown)}; known: {', '.join(POINTS)}")
    print(json.dumps({"start": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "code": str(args.code),
                      "burn": args.burn,
                      "load": os.getloadavg(), "cpus": os.cpu_count()}), flush=True)
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])  # noqa: S603
               for _ in range(args.burn)]
    try:
        rows = _trials(args, points)
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    print(json.dumps({"end": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
                      "load": os.getloadavg()}), flush=True)
    print(summary(rows), file=sys.stderr)


def _trials(args: argparse.Namespace, points: list[str]) -> list[dict]:
    rows = []
    for repeat in range(args.repeats):
        for sig in (getattr(signal, f"SIG{name}") for name in args.signals.split(",")):
            for point in points:
                rows.append({"repeat": repeat + 1,
                             **trial(point, sig, args.wait, args.code.resolve())})
                print(json.dumps(rows[-1]), flush=True)
    return rows


if __name__ == "__main__":
    main()
