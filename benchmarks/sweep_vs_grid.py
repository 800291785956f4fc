"""Grid vs sweep: how many launches `mopt sweep` saves, and how close its choice gets.

On the tiny CPU model, measures an exhaustive log-spaced grid of max_num_seqs, then runs
`mopt sweep` over the same range, and prints the launches each used and the chosen QPS as
a fraction of the grid's best. Goal (issue 4): at most half the launches, at least 95%.

    .venv/bin/python benchmarks/sweep_vs_grid.py [--recipe recipes/tiny-cpu.yaml]

Takes about 35 s per launch on 2 cores (so ~12 minutes). Archives go to a temp folder.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from model_optimizer.measure import variant
from model_optimizer.recipe import load_recipe
from model_optimizer.runner import run_recipe
from model_optimizer.sweep.loop import start_sweep

GRID = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


def measure_grid(loaded, runs: Path) -> dict[int, float]:
    """QPS at every grid value (one launch each)."""
    qps = {}
    for value in GRID:
        outcome = run_recipe(variant(loaded, [f"engine.max_num_seqs={value}",
                                              f"workload.concurrency={value}"]), runs)
        qps[value] = outcome.metrics.get("qps") if outcome.ok else None
        print(f"grid  max_num_seqs={value:>3}: {qps[value] or 0:7.2f} req/s ({outcome.status})",
              flush=True)
    return qps


def main() -> None:
    """Run both searches and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="recipes/tiny-cpu.yaml")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="mopt-bench-"))
    recipe_copy = scratch / "recipe.yaml"
    shutil.copy(args.recipe, recipe_copy)
    text = recipe_copy.read_text().replace("../models/", str(Path("models").resolve()) + "/")
    recipe_copy.write_text(text)
    loaded = load_recipe(recipe_copy, ["sweep.confirm_duration_s=0", "sweep.max_launches=12",
                                       "sweep.resolution=2", "workload.concurrency=null"])
    grid = measure_grid(loaded, scratch / "grid")
    outcome = start_sweep(loaded, scratch / "sweep", flags={"start": 1, "max": 64},
                          output=scratch / "written.yaml")
    summary = json.loads((outcome.archive / "summary.json").read_text())
    best_value = max((v for v in grid if grid[v]), key=lambda v: grid[v])
    chosen = outcome.chosen.value if outcome.chosen else None
    chosen_qps = outcome.chosen.metric if outcome.chosen else 0.0
    print(f"\ngrid : {len(GRID)} launches, best {grid[best_value]:.2f} req/s at {best_value}")
    print(f"sweep: {summary['launches']} launches, chose {chosen} at {chosen_qps:.2f} req/s "
          f"(sweep's own measurement; objective {summary['objective']})")
    print(f"launches: {summary['launches'] / len(GRID):.0%} of the grid's")
    print(f"chosen QPS / grid best: {chosen_qps / grid[best_value]:.1%}")
    if chosen in grid and grid[chosen]:
        print(f"grid's own QPS at the chosen value / grid best: "
              f"{grid[chosen] / grid[best_value]:.1%}")
    print(f"archives: {scratch}")


if __name__ == "__main__":
    main()
