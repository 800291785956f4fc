"""Serve tiny-cpu (max_num_seqs 8, the recipe's placement) and run ``agreement.py`` against it
at each given concurrency, both clients on the last core (``taskset``), as on the quiet test
bed (docs/benchmarks/agreement.md):

    flock /tmp/mopt-engine.lock env PYTHONPATH=. .venv/bin/python benchmarks/agreement_bed.py 4 1
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from model_optimizer.recipe import load_recipe
from model_optimizer.runner import serve


def main() -> None:
    """One server; agreement.py per concurrency on the argument list."""
    loaded = load_recipe(Path("recipes/tiny-cpu.yaml").resolve(), ["engine.max_num_seqs=8"])
    last_core = str(max(os.sched_getaffinity(0)))
    with serve(loaded, tempfile.mkdtemp(prefix="mopt-agree-")) as (engine, outcome):
        if engine is None:
            sys.exit(f"the server did not start: {outcome.failure}")
        for concurrency in sys.argv[1:] or ["4"]:
            print(f"=== concurrency {concurrency}", flush=True)
            subprocess.run(["taskset", "-c", last_core, sys.executable,
                            "benchmarks/agreement.py", "--url", engine.base_url,
                            "--model-dir", "models/tiny-llama", "--prompt-tokens", "64",
                            "--output-tokens", "32", "--concurrency", concurrency,
                            "--num-requests", "100", "--repeats", "3"], check=False)


if __name__ == "__main__":
    main()
