"""How long does `mopt export` take, all four formats, on the tiny CPU recipe?

Runs ``--repeats`` times each:

- **in process**: ``export.export_recipe`` (render, secret check, write, archive);
- **command**: ``python -m model_optimizer export ... -f vllm -f compose -f kubernetes
  -f systemd --tune-workers 2`` as a user runs it (interpreter start and imports included).

Printed: median, min and max seconds of each, the files' total size, and the load average
beside them (the figures depend on the machine's load).

Usage: ``python benchmarks/export_time.py [--repeats 5]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from model_optimizer.export import ExportOptions, export_recipe  # noqa: E402
from model_optimizer.models.tiny import build_tiny_model  # noqa: E402
from model_optimizer.recipe import load_recipe  # noqa: E402

RECIPE = REPO_ROOT / "recipes" / "tiny-cpu.yaml"
FORMATS = ("vllm", "compose", "kubernetes", "systemd")


def _summary(label: str, values: list[float]) -> str:
    return (f"{label:<12} median {statistics.median(values):6.3f} s   "
            f"min {min(values):6.3f}   max {max(values):6.3f}   (n={len(values)})")


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    build_tiny_model(REPO_ROOT / "models" / "tiny-llama")
    work = Path(tempfile.mkdtemp(prefix="mopt-export-bench-"))
    in_process, command = [], []
    size = 0
    for index in range(args.repeats):
        start = time.perf_counter()
        out = export_recipe(load_recipe(RECIPE), work / f"p{index}", work / "runs",
                            ExportOptions(FORMATS, tune_workers=2, force=True))  # unvalidated demo
        in_process.append(time.perf_counter() - start)
        size = sum(p.stat().st_size for p in out.folder.iterdir())
        argv = [sys.executable, "-m", "model_optimizer", "export", str(RECIPE), "--to",
                str(work / f"c{index}"), *[a for f in FORMATS for a in ("-f", f)],
                "--tune-workers", "2", "--runs-dir", str(work / "runs")]
        start = time.perf_counter()
        subprocess.run(argv, check=True, capture_output=True, cwd=REPO_ROOT)
        command.append(time.perf_counter() - start)
    print(f"mopt export, {', '.join(FORMATS)} + tune Job, {RECIPE.name}: "
          f"{len(list(out.folder.iterdir()))} files, {size} bytes")
    print(_summary("in process", in_process))
    print(_summary("command", command))
    print("load average: " + " ".join(f"{v:.2f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
