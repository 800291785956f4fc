"""How long do `mopt init` + `mopt optimize` take on the tiny trained model, with no flags?

What a new user runs (issue 25; goal: under 5 minutes on 2 quiet cores): a copy of
``models/tiny-llama-trained`` in a temporary folder, ``mopt init MODEL --output R`` (the
quality gate on by default), then ``mopt optimize R --json``. Printed: the wall time of each
command, every stage's seconds, launches and status from the pipeline's ``state.json`` and
``report.md``, the survivor, the cost of pinning (SHA-256 of a ``--hash-mib`` weight file,
first read and cached), and the 1-minute load average before and after (the machine is
shared: a figure without its load means little). Start it under the engine lock on a shared
machine: ``flock /tmp/mopt-engine.lock python benchmarks/optimize_time.py``.

Usage: ``python benchmarks/optimize_time.py [--keep DIR]``
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from model_optimizer.models.pins import checkpoint_hash  # noqa: E402
from model_optimizer.models.trained import build_trained_model  # noqa: E402
from model_optimizer.search.optimize.report import stage_launches  # noqa: E402

MOPT = [sys.executable, "-m", "model_optimizer"]


def _timed(*args: str) -> tuple[float, subprocess.CompletedProcess]:
    started = time.monotonic()
    done = subprocess.run([*MOPT, *args], capture_output=True, text=True, cwd=REPO_ROOT,
                          timeout=3600)
    return time.monotonic() - started, done


def pin_cost(work: Path, megabytes: int) -> None:
    """Hash a checkpoint folder of one ``megabytes`` weight file twice: the first read, then
    the per-process cache (what a second pin of the same checkpoint costs)."""
    folder = work / "pin-cost"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text("{}")
    with (folder / "model.safetensors").open("wb") as handle:
        for _ in range(megabytes):
            handle.write(os.urandom(1 << 20))
    started = time.monotonic()
    checkpoint_hash(folder)
    first = time.monotonic() - started
    started = time.monotonic()
    checkpoint_hash(folder)
    again = time.monotonic() - started
    rate = megabytes / 1024 / first
    print(f"pin hashing: {megabytes} MiB in {first:.2f} s ({rate:.2f} GiB/s; a 16 GiB "
          f"checkpoint ~{16 / rate:.0f} s), again in the same process {again * 1000:.1f} ms "
          f"(load {os.getloadavg()[0]:.2f})")
    shutil.rmtree(folder)


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, default=None, help="work here and keep it")
    parser.add_argument("--hash-mib", type=int, default=256, help="size of the pin-cost file")
    parser.add_argument("--hash-only", action="store_true", help="only the pin cost")
    args = parser.parse_args()
    if args.hash_only:
        pin_cost(Path(tempfile.mkdtemp(prefix="mopt-pinbench-")), args.hash_mib)
        return
    work = args.keep or Path(tempfile.mkdtemp(prefix="mopt-optbench-"))
    model = work / "tiny-llama-trained"
    if not model.is_dir():
        shutil.copytree(build_trained_model(REPO_ROOT / "models" / "tiny-llama-trained"), model)
    recipe = work / "recipes" / "tiny.yaml"
    recipe.unlink(missing_ok=True)
    load_before = os.getloadavg()
    init_s, init = _timed("init", str(model), "--output", str(recipe))
    if init.returncode != 0:
        sys.exit(f"mopt init failed ({init.returncode}): {init.stdout}{init.stderr}")
    opt_s, done = _timed("optimize", str(recipe), "--runs-dir", str(work / "runs"), "--json")
    load_after = os.getloadavg()
    if done.returncode != 0:
        sys.exit(f"mopt optimize failed ({done.returncode}): {done.stderr[-3000:]}")
    outcome = json.loads(done.stdout)
    archive = work / "runs" / outcome["pipeline_id"]
    state = json.loads((archive / "state.json").read_text())
    print(f"load average (1 min) before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    print(f"mopt init      {init_s:7.1f} s")
    print(f"mopt optimize  {opt_s:7.1f} s   survivor {outcome['survivor']}")
    print(f"total          {init_s + opt_s:7.1f} s   (goal: under 300 s on 2 quiet cores)")
    print(f"{'stage':<10} {'status':<10} {'launches':>8} {'seconds':>8}  quality")
    for name, record in state["stages"].items():
        gate = record.get("gate") or {}
        verdict = ("reference" if gate.get("baseline") else "passed" if gate.get("passed")
                   else "FAILED") if gate.get("gated") else "-"
        print(f"{name:<10} {record.get('status', '?'):<10} "
              f"{stage_launches(name, record):>8} {record.get('seconds') or 0:>8.1f}  {verdict}")
    print(f"report: {archive / 'report.md'}")
    pin_cost(work, args.hash_mib)


if __name__ == "__main__":
    main()
