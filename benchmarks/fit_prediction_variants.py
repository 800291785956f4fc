"""Every prediction model against the held-out protocol, in the simulator and on the recorded
real windows (issue 35 item 4): the variants' table behind ``docs/benchmarks/fit-prediction.md``.

Per model (``predict.Model``: drift ``linear`` | ``runs``, TTFT ``little`` | ``window`` |
``hinge`` | ``interp``) and protocol (the fit on the first 2 passes of the other levels, as a
probe-fit scan has them, or on every pass, the time of the reference windows), the worst
curve's MAPE per noise (``search/simulate/predtable.py``) and the MAPE on the recorded real
windows (``fit_prediction_real.py --analyse``). Each (model, protocol) is one short run
under the CPU lock when ``--lock`` names it.

    .venv/bin/python benchmarks/fit_prediction_variants.py [--reps 20] [--noise cv0,cv5,cv10]
        [--models linear:little,runs:interp] [--lock /work/cpu.lock]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import statistics
import time
from pathlib import Path

from fit_prediction_real import passes_of

from model_optimizer.search.simulate.bench import REGIMES
from model_optimizer.search.simulate.predtable import FIGURES, held_out, simulate_prediction
from model_optimizer.search.simulate.truth import curves
from model_optimizer.search.sweep.predict import DRIFTS, TTFTS, Model

REAL = "docs/benchmarks/grids/fit-prediction-1207.json"
PROTOCOLS = {"2 passes": 2, "all passes": None}


@contextlib.contextmanager
def locked(path: str | None):
    """Hold ``path`` (flock) for one block; nothing without a path."""
    if not path:
        yield
        return
    with open(path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def real_mape(record: dict, rounds: int | None, model: Model) -> dict[str, float]:
    """MAPE per figure on the recorded real windows."""
    errors = [item.errors() for item in held_out(passes_of(record), record["levels"],
                                                  rounds=rounds, model=model)]
    return {key: statistics.fmean(e[key] for e in errors if key in e) for key in FIGURES}


def sim_cells(model: Model, rounds: int | None, noise: str, reps: int) -> dict[str, float]:
    """The worst curve's throughput and TTFT p50 MAPE at ``noise``, and TTFT p50's worst
    without knee-flat."""
    shapes = curves()
    rows = [simulate_prediction(shapes[name], REGIMES[noise], 1 if noise == "cv0" else reps,
                                rounds=rounds, model=model)
            for name in shapes if not shapes[name].categorical]
    flat = [r for r in rows if r.curve != "knee-flat"]
    return {"qps": max(r.mape["qps"] for r in rows),
            "ttft_p50_ms": max(r.mape["ttft_p50_ms"] for r in rows),
            "ttft_p50_no_flat": max(r.mape["ttft_p50_ms"] for r in flat),
            "ttft_p99_ms": max(r.mape["ttft_p99_ms"] for r in rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=20, help="per cell (cv0: one)")
    parser.add_argument("--noise", default="cv0,cv5,cv10")
    parser.add_argument("--models", default=",".join(f"{d}:{t}" for d in DRIFTS for t in TTFTS))
    parser.add_argument("--protocols", default=",".join(PROTOCOLS))
    parser.add_argument("--lock", default=None, help="a lock file held per (model, protocol)")
    args = parser.parse_args()
    record = json.loads(Path(REAL).read_text())
    noises = args.noise.split(",")
    print("| protocol | model | real thr | real TTFT p50 | real TTFT p99 | "
          + " | ".join(f"{n} thr / p50 (no flat)" for n in noises) + " |")
    print("|---" * (5 + len(noises)) + "|")
    began = time.monotonic()
    for protocol in args.protocols.split(","):
        for text in args.models.split(","):
            model = Model.parse(text)
            with locked(args.lock):
                real = real_mape(record, PROTOCOLS[protocol], model)
                sim = {n: sim_cells(model, PROTOCOLS[protocol], n, args.reps) for n in noises}
            cells = [f"{sim[n]['qps']:.1%} / {sim[n]['ttft_p50_ms']:.1%} "
                     f"({sim[n]['ttft_p50_no_flat']:.1%})" for n in noises]
            print(f"| {protocol} | {model.name()} | {real['qps']:.1%} | "
                  f"{real['ttft_p50_ms']:.1%} | {real['ttft_p99_ms']:.1%} | "
                  + " | ".join(cells) + " |", flush=True)
    print(f"\n{args.reps} repetitions per cell (cv0: one), {time.monotonic() - began:.0f} s")


if __name__ == "__main__":
    main()
