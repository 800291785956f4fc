"""The planner on the published config.json test set: parameters (published, mopt), KV bytes
per token, the TPOT floor on an H200 at batch 1, the verdicts on A10 / L40S / H200 at each
model's own max length, and how long counting takes (cold: transformers builds the model on
the meta device; warm: read from the cache).

    python benchmarks/planner_table.py [--big CONFIG.json ...]

Prints a Markdown table and the timings (seconds, wall clock, with the load average).
"""

from __future__ import annotations

import argparse
import copy
import importlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from model_optimizer.plan import estimate, load_model_config  # noqa: E402
from model_optimizer.plan.param_count import _counts_for, count_parameters  # noqa: E402


def _published() -> dict:
    """The test set's published counts and hand-worked KV figures (one definition)."""
    return importlib.import_module("tests.unit.plan.test_published_configs").PUBLISHED


def _recipe(accelerator: str) -> dict:
    schema = json.loads((ROOT / "schemas" / "recipe.v1.json").read_text())
    recipe = {"recipe_version": 1, "name": "table"}
    for section in ("model", "engine", "hardware", "workload"):
        props = schema["properties"][section]["properties"]
        recipe[section] = {k: copy.deepcopy(v["default"]) for k, v in props.items()
                           if "default" in v}
    recipe["hardware"]["accelerator"] = accelerator
    return recipe


def table(published: dict) -> list[str]:
    """One Markdown row per config."""
    rows = ["| model | params published | params mopt | source | KV bytes/token | "
            "TPOT floor H200, batch 1 | A10 | L40S | H200 |", "|---" * 9 + "|"]
    for name, (params, _kv, _fits) in published.items():
        config = load_model_config(ROOT / "tests" / "data" / "configs" / f"{name}.json")
        reports = {a: estimate(_recipe(a), config) for a in ("A10", "L40S", "H200")}
        h200 = reports["H200"]
        source = "transformers" if h200.param_source.startswith("transformers") else "arithmetic"
        rows.append(f"| {name} | {params / 1e9:.2f} B | {h200.param_count / 1e9:.3f} B | "
                    f"{source} | {h200.kv_bytes_per_token:,} | "
                    f"{h200.decode_floors[0].tpot_floor_ms:.2f} ms | "
                    + " | ".join(r.verdict for r in reports.values()) + " |")
    return rows


def timings(paths: list[Path]) -> list[str]:
    """Cold (meta-device build) and warm (cache) counting time per config."""
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["MOPT_CACHE_DIR"] = tmp
        for path in paths:
            config = json.loads(path.read_text())
            _counts_for.cache_clear()
            started = time.perf_counter()
            cold = count_parameters(config)
            cold_s = time.perf_counter() - started
            _counts_for.cache_clear()
            started = time.perf_counter()
            count_parameters(config)
            warm_s = time.perf_counter() - started
            total = f"{cold.total:,}" if cold else "not buildable"
            lines.append(f"{path.name}: {total} params; cold {cold_s:.2f} s (build "
                         f"{cold.seconds if cold else 0:.2f} s), warm {warm_s * 1000:.1f} ms")
    return lines


def main(argv: list[str] | None = None) -> int:
    """Print the table, then the timings."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", nargs="*", type=Path, default=[],
                        help="more config.json files to time (e.g. DeepSeek-V3)")
    args = parser.parse_args(argv)
    print(f"load average {os.getloadavg()}")
    started = time.perf_counter()
    import transformers  # noqa: F401 - the first import is part of a cold `mopt plan`
    print(f"importing torch + transformers: {time.perf_counter() - started:.1f} s")
    paths = sorted((ROOT / "tests" / "data" / "configs").glob("*.json")) + args.big
    print("\n".join(timings(paths)))
    print("\n".join(table(_published())))
    print(f"load average {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
