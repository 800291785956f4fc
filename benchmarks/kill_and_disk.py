"""How fast is everything gone after ``kill -9`` of mopt, and how does a run end on a full disk?

``--engine vllm`` starts ``mopt apply`` of recipes/tiny-cpu.yaml (real vLLM: wrap it in
``flock /tmp/mopt-engine.lock``); ``--engine mock`` runs the same recipe on mopt's mock server
with an engine-core stand-in child in the server's group. Each repeat waits for 3 measured
requests, sends SIGKILL to mopt and prints:

- ``clean_s``: seconds until no process carrying the archive's ``MOPT_SERVER_ARCHIVE`` is
  left without any help (the parent-death signal alone); capped at ``--wait`` seconds;
- ``left``: processes still there then, and ``reap_s``: how long the next command's reaper
  took to stop them and seal the archive.

``--disk`` (root only: a 2 MB tmpfs) runs the mock recipe into a disk that fills during the
load and prints the status it ended with, the seconds to exit and whether its manifest
verifies. Every figure is printed with the load average it was taken under.

Usage: ``python benchmarks/kill_and_disk.py --engine mock --repeats 3 [--disk]``
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

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from model_optimizer.archive.manifest import verify_archive  # noqa: E402
from model_optimizer.reaper import reap_abandoned, server_processes  # noqa: E402

RECIPE = REPO_ROOT / "recipes" / "tiny-cpu.yaml"
MOCK_RUN = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from model_optimizer.engine.factory import MockEngine
from model_optimizer.runner import run_recipe
from unit.mock_engine import mock_recipe
loaded = mock_recipe(Path({folder!r}), Path({model!r}), overrides={overrides!r})
run_recipe(loaded, {runs!r}, engine_factory=MockEngine(ttft_ms=50, itl_ms=20,
                                                       engine_core="group"))
"""


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _mopt(engine: str, runs: Path, work: Path, overrides: list[str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    if engine == "vllm":
        sets = [arg for item in overrides for arg in ("--set", item)]
        argv = [sys.executable, "-m", "model_optimizer", "apply", str(RECIPE), "--runs-dir",
                str(runs), *sets]
    else:
        argv = [sys.executable, "-c", MOCK_RUN.format(
            tests=str(REPO_ROOT / "tests"), folder=str(work),
            model=str(REPO_ROOT / "models" / "tiny-llama"), overrides=overrides, runs=str(runs))]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            cwd=REPO_ROOT)


def _measuring(runs: Path, proc: subprocess.Popen, timeout: float = 600) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        for log in runs.rglob("requests.jsonl"):
            lines = log.read_text().splitlines()
            if sum('"warmup": false' in line for line in lines) >= 3:
                return log.parent
        time.sleep(0.2)
    raise SystemExit("the load did not start (see the archive's engine.log)")


def one_kill(engine: str, wait_s: float) -> dict:
    """One SIGKILL during a load; the figures of that repeat."""
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs"
        proc = _mopt(engine, runs, Path(tmp), ["workload.num_requests=100000",
                                               "workload.duration_s=300"])
        try:
            archive = _measuring(runs, proc)
            before = len(server_processes(archive))
            proc.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            proc.wait(timeout=30)
            while server_processes(archive) and time.monotonic() - killed < wait_s:
                time.sleep(0.1)
            clean_s, left = time.monotonic() - killed, len(server_processes(archive))
            started = time.monotonic()
            reap_abandoned(runs)
            reap_s = time.monotonic() - started
            status = json.loads((archive / "status.json").read_text())
        finally:
            proc.kill()
        return {"server_processes": before, "clean_s": round(clean_s, 2), "left": left,
                "reap_s": round(reap_s, 2), "status": status["status"],
                "stopped_by_reaper": status.get("abandoned_processes_stopped"), "load": _load()}


def full_disk() -> dict:
    """A mock run into a 2 MB tmpfs that is filled once the load runs."""
    with tempfile.TemporaryDirectory() as tmp:
        disk = Path(tmp) / "disk"
        disk.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], check=True)
        try:
            proc = _mopt("mock", disk / "runs", Path(tmp), ["workload.num_requests=400"])
            archive = _measuring(disk / "runs", proc)
            started = time.monotonic()
            with open(disk / "filler", "wb", buffering=0) as handle:
                try:
                    while True:
                        handle.write(b"\0" * 4096)
                except OSError:
                    pass
            code = proc.wait(timeout=120)
            status = json.loads((archive / "status.json").read_text())
            return {"status": status["status"], "exit_s": round(time.monotonic() - started, 2),
                    "returncode": code, "manifest_ok": verify_archive(archive) == [],
                    "load": _load()}
        finally:
            subprocess.run(["umount", "-l", str(disk)], check=False)


def main() -> None:
    """Parse the flags, run the repeats, print one JSON line each and a summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=("mock", "vllm"), default="mock")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--wait", type=float, default=30.0)
    parser.add_argument("--disk", action="store_true")
    args = parser.parse_args()
    figures = []
    for repeat in range(args.repeats):
        figures.append(one_kill(args.engine, args.wait))
        print(json.dumps({"repeat": repeat + 1, "engine": args.engine, **figures[-1]}), flush=True)
    if figures:
        clean = [f["clean_s"] for f in figures]
        print(f"clean_s median {statistics.median(clean):.2f} (min {min(clean):.2f}, max "
              f"{max(clean):.2f}) over {len(clean)}; processes left for the reaper: "
              f"{[f['left'] for f in figures]}; load {_load()}")
    if args.disk:
        print(json.dumps({"full_disk": full_disk()}), flush=True)


if __name__ == "__main__":
    main()
