"""The search simulator's table: every strategy on every curve shape at every noise, judged
against issue 35's restated goals, and the strategy the table favours (``auto``'s default).

Pure simulation (``model_optimizer/simulate``): the real sweep strategy code, the settling of
its choice included, against ground-truth curves with known answers, seeded noise, a
simulated clock and the default budget (``sweep.budget``); no vLLM. Prints the markdown table
(one row per curve, noise and strategy; the CV 30% regime with collapses once more at 3x the
budget, ``cv30+collapse@3x``), every goal MET or MISSED with its figure for every strategy,
the favoured strategy, then the tune's cells at CV 5% (the real tune, optuna TPE, scanning
trials, its winner and runner-up launched side by side) with the tune's goals.

    .venv/bin/python benchmarks/search_sim.py [--reps 300] [--jobs 2]
        [--curves monotone,rise-fall] [--noise cv5,cv30+collapse]
        [--strategies relaunch,probe-scan,probe-fit] [--budget 30]
        [--tune-noise cv5] [--n-trials 12] [--no-tune]

A search takes 10-40 ms (probe-fit's bootstrap, the settling's rounds), a tune about 0.1 s;
the full table at 300 repetitions is about 12 minutes with ``--jobs 2`` on two idle cores.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

from model_optimizer.simulate.bench import REGIMES
from model_optimizer.simulate.drive import BUDGET_MIN, STRATEGIES
from model_optimizer.simulate.table import LOUD, Row, favoured, goals, markdown, simulate
from model_optimizer.simulate.truth import curves, surfaces
from model_optimizer.simulate.tunetable import TUNE_HEADER, TuneRow, simulate_tune, tune_goals

#: the strategies ``auto`` may resolve to for a max_num_seqs sweep (one server per scan)
SCANNING = ("probe-scan", "probe-fit")


def _sweep_cell(curve: str, label: str, strategy: str, reps: int, budget: float) -> Row:
    """One sweep cell (by names, so that a worker process can run it); ``label`` is a regime,
    or ``LOUD``: the CV 30% regime at 3x the budget."""
    noise = REGIMES["cv30+collapse"] if label == LOUD else REGIMES[label]
    scale = 3.0 if label == LOUD else 1.0
    return simulate(curves()[curve], noise, strategy, reps, name=label,
                    budget=budget * scale)


def _tune_cell(surface: str, noise: str, reps: int, n_trials: int) -> TuneRow:
    """One tune cell (by names, so that a worker process can run it)."""
    return simulate_tune(surfaces()[surface], REGIMES[noise], reps, n_trials=n_trials)


def verdict_lines(judged: list[tuple[str, bool, str]]) -> list[str]:
    """Each goal as a line: MET or MISSED with its figure."""
    return [f"- {name}: **{'MET' if ok else 'MISSED'}** ({figure})"
            for name, ok, figure in judged]


def run_sweeps(args: argparse.Namespace, pool: ProcessPoolExecutor) -> list[Row]:
    """Every sweep cell, in table order."""
    names = args.curves.split(",") if args.curves else list(curves())
    labels = args.noise.split(",")
    if "cv30+collapse" in labels:
        labels.insert(labels.index("cv30+collapse") + 1, LOUD)
    cells = [(name, label, strategy, args.reps, args.budget) for name in names
             for label in labels for strategy in args.strategies.split(",")]
    return list(pool.map(_sweep_cell, *zip(*cells, strict=True)))


def main() -> None:
    """Run the cells and print the tables, the goals and the favoured strategy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--curves", default=None, help="default: every curve")
    parser.add_argument("--noise", default=",".join(REGIMES))
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--budget", type=float, default=BUDGET_MIN, help="minutes")
    parser.add_argument("--tune-noise", default="cv5", help="the tune's regimes")
    parser.add_argument("--n-trials", type=int, default=12, help="the tune's trial budget")
    parser.add_argument("--no-tune", action="store_true", help="the sweep table only")
    parser.add_argument("--jobs", type=int, default=1, help="cells at a time")
    args = parser.parse_args()
    began = time.monotonic()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        rows = run_sweeps(args, pool)
        print(markdown(rows))
        print()
        strategies = args.strategies.split(",")
        for strategy in strategies:
            print(f"{strategy}:")
            print("\n".join(verdict_lines(goals(rows, strategy))))
        scanning = [s for s in strategies if s in SCANNING]
        if scanning:
            print(f"\nfavoured for `auto` (most goals met, then the worst cell near the "
                  f"knee, then resolved, at CV <= 5%): **{favoured(rows, scanning)}**")
        print(f"\n{len(rows)} sweep cells x {args.reps} repetitions, budget "
              f"{args.budget:g} min, in {time.monotonic() - began:.0f} s")
        if args.no_tune:
            return
        names = [n for n in (args.curves.split(",") if args.curves else surfaces())
                 if n in surfaces()]
        cells = [(name, noise, args.reps, args.n_trials) for name in names
                 for noise in args.tune_noise.split(",")]
        tunes = list(pool.map(_tune_cell, *zip(*cells, strict=True)))
    print()
    print(markdown(tunes, TUNE_HEADER))
    print()
    print("\n".join(verdict_lines(tune_goals(tunes))))
    print(f"\n{len(tunes)} tune cells x {args.reps} repetitions (tpe, {args.n_trials} "
          f"trials); {time.monotonic() - began:.0f} s in all")


if __name__ == "__main__":
    main()
