"""Prediction from the fitted curve on the real engine: held-out levels against their windows.

Issue 35 item 4 asks for the fitted curve's error on levels it did not measure, on the real
engine, each held-out level against the median of at least 5 windows. The simulator measures
the same rule on known curves (``model_optimizer/search/simulate/predtable.py``); this script feeds
that rule real windows:

1. one vLLM server launched at ``--ceiling`` (the probe-fit scan server), the coarse levels of
   probe-fit (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64) measured in ``--rounds`` interleaved
   passes (up, down, up, ...), each a steady-state window of ``--duration`` s at that
   concurrency; every window is saved to ``--out`` as soon as it ends;
2. leaving one level out at a time (every level but the lowest and the highest), the curve is
   fitted on the first two passes of the other levels (the up and down windows a probe-fit scan
   takes) and predicts the held-out level (``predtable.held_out``); its absolute percentage
   error is taken against the median of that level's windows.

Run it on an idle machine under the CPU lock (it refuses a busy one, ``quiet.py``):

    flock /work/cpu.lock .venv/bin/python benchmarks/fit_prediction_real.py \\
        --out docs/benchmarks/grids/fit-prediction-1207.json
    .venv/bin/python benchmarks/fit_prediction_real.py --out FILE --analyse   # no launch
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from quiet import add_quiet_args, require_quiet

from model_optimizer.events import EventCallback
from model_optimizer.load.figures import Figures
from model_optimizer.recipe import load_recipe
from model_optimizer.search.core.scan import ScanServer
from model_optimizer.search.simulate.predtable import FIGURES, held_out
from model_optimizer.search.sweep.fitscan import coarse_levels
from model_optimizer.search.sweep.predict import Observed

SETS = ["workload.num_requests=null", "workload.concurrency=null",
        "engine.startup_timeout_s=540"]


def _quiet_emit() -> EventCallback:
    return lambda event: None


def measure(args) -> dict:
    """Every window of ``args.rounds`` passes over the coarse levels on one server, saved to
    ``args.out`` after each (a rerun starts a new server and a new record)."""
    loaded = load_recipe(Path(args.recipe).resolve(),
                         [*SETS, f"workload.duration_s={args.duration}"])
    levels = coarse_levels(1, args.ceiling)
    server = loaded.varied({"engine.max_num_seqs": args.ceiling}, "prediction scan server")
    record = {"recipe": args.recipe, "ceiling": args.ceiling, "levels": levels,
              "duration_s": args.duration, "rounds": args.rounds, "windows": [],
              "load_average_before": os.getloadavg()}
    steps = Path(tempfile.mkdtemp(prefix="mopt-predict-"))
    with ScanServer(server, steps, args.ceiling, _quiet_emit(), {"benchmark": "predict"}) as scan:
        born = time.monotonic()
        for number in range(args.rounds):
            for level in levels if number % 2 == 0 else list(reversed(levels)):
                started = (time.monotonic() - born) / 60.0
                outcome = scan.window(level, {"round": number})
                figures = Figures.of(outcome.metrics)
                row = {"round": number, "value": level, "minute": round(started, 3),
                       "ok": bool(outcome.ok), "qps": figures.qps,
                       "ttft_p50_ms": figures.ttft_p50_ms, "ttft_p99_ms": figures.ttft_p99_ms,
                       "load_average": os.getloadavg()[0]}
                record["windows"].append(row)
                Path(args.out).write_text(json.dumps(record, indent=1))
                print(json.dumps(row), flush=True)
    record["load_average_after"] = os.getloadavg()
    Path(args.out).write_text(json.dumps(record, indent=1))
    return record


def passes_of(record: dict) -> list[list[Observed]]:
    """The saved windows as passes of :class:`Observed` (failed windows left out)."""
    passes: dict[int, list[Observed]] = {}
    for row in record["windows"]:
        if row["ok"] and row.get("qps"):
            passes.setdefault(row["round"], []).append(
                Observed(row["value"], row["qps"], row.get("ttft_p50_ms"),
                         row.get("ttft_p99_ms"), row["minute"]))
    return [passes[number] for number in sorted(passes)]


def analyse(record: dict) -> str:
    """The per-level table and the MAPE of each figure, as markdown."""
    found = held_out(passes_of(record), record["levels"])
    lines = ["| held-out level | windows | measured req/s (median) | predicted | APE | "
             "TTFT p50 measured / predicted ms | APE | TTFT p99 APE |", "|---" * 8 + "|"]
    errors = []
    for item in found:
        row = item.errors()
        errors.append(row)
        shown = {key: f"{row[key] * 100:.1f}%" if key in row else "-" for key in FIGURES}
        lines.append(
            f"| {item.level} | {len(item.windows)} | {item.measured('qps'):.2f} | "
            f"{item.later['qps']:.2f} | {shown['qps']} | "
            f"{item.measured('ttft_p50_ms') or 0:.1f} / {item.now.get('ttft_p50_ms') or 0:.1f}"
            f" | {shown['ttft_p50_ms']} | {shown['ttft_p99_ms']} |")
    mape = {key: statistics.fmean(r[key] for r in errors if key in r)
            for key in FIGURES if any(key in r for r in errors)}
    lines.append("")
    lines.append("MAPE over " + str(len(errors)) + " held-out levels: " + ", ".join(
        f"{key} {value * 100:.1f}%" for key, value in mape.items()))
    return "\n".join(lines)


def main() -> None:
    """Parse, measure (unless ``--analyse``), print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the windows' JSON file")
    parser.add_argument("--recipe", default="recipes/tiny-cpu.yaml")
    parser.add_argument("--ceiling", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--duration", type=float, default=10.0, help="window (s)")
    parser.add_argument("--analyse", action="store_true", help="no launch: the saved windows")
    add_quiet_args(parser)
    args = parser.parse_args()
    if args.analyse:
        record = json.loads(Path(args.out).read_text())
    else:
        print(f"machine before: {require_quiet(args)}", flush=True)
        record = measure(args)
    print(analyse(record))


if __name__ == "__main__":
    main()
