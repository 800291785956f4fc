"""The search simulator's table: every strategy on every curve shape at every noise (issue 20).

Pure simulation (``model_optimizer/search/simulate``): the real sweep strategy code against
ground-truth curves with known answers, seeded noise, a simulated clock; no vLLM. Prints the
markdown table (one row per curve, noise and strategy) and the goal verdicts, and writes a
PNG of chosen / true best (p5 and median) per cell.

    .venv/bin/python benchmarks/search_sim.py [--reps 300] [--png sim.png]
        [--curves monotone,rise-fall] [--noise cv5,cv30+collapse]
        [--strategies relaunch,probe-scan,probe-fit] [--jobs 2] [--predict-reps 0]

A relaunch or probe-scan search takes a few milliseconds, a fitted one some tens (its
bootstrap); the full table at 300 repetitions is about 15 minutes on one busy core.
``--jobs 2`` runs the cells in two processes (the rows are the same: each cell is seeded).

``--tune`` prints the tune's table instead: the real tune (optuna TPE, scanning trials, the
confirming launch) on every numeric curve times a block_size effect of 1.00 / 1.03 / 0.97
(``search/simulate/tunedrive.py``), one row per surface and noise; about 0.1 s a tune, so
``--jobs 2`` on two cores.

    .venv/bin/python benchmarks/search_sim.py --tune [--reps 300] [--jobs 2]
        [--n-trials 12] [--curves ...] [--noise ...]

After the sweep table, the fitted curve's predictions at levels it did not measure
(``search/simulate/predtable.py``, issue 35 item 4): per numeric curve and noise,
leave-one-level-out MAPE of throughput and TTFT p50/p99 against the median of 5 windows at the
held-out level (and against the truth), with the goals (throughput <= 5%, TTFT p50 <= 15%) MET or
MISSED per noise; ``--predict-reps`` repetitions (default 100: about 4 minutes on one busy core).
``--predict`` prints that table alone.

    .venv/bin/python benchmarks/search_sim.py --predict [--predict-reps 100] [--noise ...]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor

from model_optimizer.search.simulate.bench import REGIMES
from model_optimizer.search.simulate.drive import BUDGET_MIN, STRATEGIES
from model_optimizer.search.simulate.predtable import (
    PREDICTION_HEADER,
    PredictionRow,
    simulate_prediction,
)
from model_optimizer.search.simulate.table import Row, markdown, simulate
from model_optimizer.search.simulate.truth import curves, surfaces
from model_optimizer.search.simulate.tunetable import TUNE_HEADER, TuneRow, simulate_tune

DEFAULT = "probe-fit"
#: issue 35 item 4: held-out MAPE goals (anchors: AIConfigurator 5.3% throughput, LLM-Emu
#: 10.4% TTFT)
PREDICTION_GOALS = (("qps", "throughput MAPE", 0.05), ("ttft_p50_ms", "TTFT p50 MAPE", 0.15))


def goals(rows: list[Row], loud_3x: list[Row]) -> list[str]:
    """Issue 35's goals, MET or MISSED, for the default strategy (``loud_3x``: the CV 30%
    cells again at three times the default budget)."""
    default = [r for r in rows if r.strategy == DEFAULT]
    quiet = [r for r in default if r.noise in ("cv0", "cv2", "cv5")]
    numeric = [r for r in quiet if r.curve != "categorical"]
    loud = [r for r in loud_3x if r.strategy == DEFAULT]
    checks = [
        ("calibration: among resolved choices, <= 1% below 0.90 of the true best, every cell",
         all(r.calibration <= 0.01 for r in default + loud),
         _worst(default + loud, "calibration", high=True)),
        ("CV <= 5%: resolved in >= 95% within the default budget",
         all(r.resolved >= 0.95 for r in quiet), _worst(quiet, "resolved")),
        ("CV <= 5%: >= 0.98 of the true knee's req/s and <= 1.25x the knee in >= 95%",
         all(r.near_knee >= 0.95 for r in numeric), _worst(numeric, "near_knee")),
        ("CV <= 5%: <= 3 launches (max_num_seqs)",
         all(r.max_launches <= 3 for r in numeric), _worst(numeric, "max_launches", high=True)),
        ("CV 30% + collapses: resolved in >= 50% within 3x the default budget",
         all(r.resolved >= 0.50 for r in loud), _worst(loud, "resolved")),
    ]
    if not default or not loud:   # nothing to judge: a goal met by no cell is not met
        return [f"- {name}: **NOT JUDGED** ({DEFAULT}, the strategy judged, was not run "
                "in every regime)" for name, _, _ in checks]
    return [f"- {name}: **{'MET' if ok else 'MISSED'}** (worst cell: {worst})"
            for name, ok, worst in checks]


def grid_launches(surface) -> int:
    """The grid a tune replaces: every power of two in the curve's range times the knob's
    choices, a launch each (21 on the CPU curves, 27 on the GPU one)."""
    powers = [2 ** k for k in range(16) if surface.curve.low <= 2 ** k <= surface.curve.high]
    return len(powers) * len(surface.effects)


def tune_goals(rows: list[TuneRow]) -> list[str]:
    """Issue 35's tune goal at CV 5%, MET or MISSED per part, with the worst cell:
    >= 0.95 of the true best in >= 95%, at most half the grid's launches (median), and
    calibrated as the sweep is (among resolved tunes, <= 1% below 0.90 of the true best)."""
    quiet = [r for r in rows if r.noise == "cv5"]
    if not quiet:
        return ["- tune goals: **NOT JUDGED** (no cv5 cell)"]
    shapes = surfaces()
    half = [(r, r.launches / grid_launches(shapes[r.surface])) for r in quiet]
    near = min(quiet, key=lambda r: r.at_least_95)
    costly = max(half, key=lambda pair: pair[1])
    loose = max(quiet, key=lambda r: r.calibration)
    return [
        f"- tune, CV 5%: >= 0.95 of the true best in >= 95%: "
        f"**{'MET' if near.at_least_95 >= 0.95 else 'MISSED'}** (worst cell: {near.surface} "
        f"{near.at_least_95:.1%})",
        f"- tune, CV 5%: <= half the grid's launches: "
        f"**{'MET' if costly[1] <= 0.5 else 'MISSED'}** (worst cell: {costly[0].surface} "
        f"{costly[0].launches:.0f} of {grid_launches(shapes[costly[0].surface])})",
        f"- tune, CV 5%: among resolved, <= 1% below 0.90 of the true best: "
        f"**{'MET' if loose.calibration <= 0.01 else 'MISSED'}** (worst cell: "
        f"{loose.surface} {loose.calibration:.1%} of {loose.resolved:.1%} resolved)"]


def wrong_cases(rows: list[TuneRow]) -> list[str]:
    """The resolved tunes below 0.90 of the true best, one line each (the seed reruns it:
    ``run_tune(surface, noise, seed)``)."""
    lines = [f"- {r.surface} at {r.noise}, seed {seed}: wrote {chosen}, {ratio:.3f} of the "
             "true best, resolved" for r in rows for seed, chosen, ratio in r.wrong_cases]
    return lines or ["- no resolved tune below 0.90 of the true best"]


def depths(rows: list[Row]) -> list[str]:
    """Per strategy, how far below 0.90 its confidently wrong choices fell: the lowest
    chosen / true best among them, and the cell."""
    lines = []
    for strategy in sorted({r.strategy for r in rows}):
        wrong = [r for r in rows if r.strategy == strategy and r.confidently_wrong > 0]
        if not wrong:
            lines.append(f"- {strategy}: never confidently wrong")
            continue
        row = min(wrong, key=lambda r: r.wrong_depth)
        lines.append(f"- {strategy}: confidently wrong in {len(wrong)} cells, at worst "
                     f"{row.wrong_depth:.3f} of the true best ({row.curve} at {row.noise})")
    return lines


def _worst(rows: list[Row], field: str, *, high: bool = False) -> str:
    if not rows:
        return "no cell"
    row = (max if high else min)(rows, key=lambda r: getattr(r, field))
    value = getattr(row, field)
    shown = value if isinstance(value, int) else f"{value:.3f}"
    return f"{row.curve} at {row.noise}: {shown}"


def plot(rows: list[Row], path: str) -> None:
    """chosen / true best per cell: median as a dot, p5 as the lower end of a bar."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    strategies = sorted({r.strategy for r in rows})
    cells = sorted({(r.curve, r.noise) for r in rows})
    fig, ax = plt.subplots(figsize=(max(8, len(cells) * 0.35), 5))
    for offset, strategy in enumerate(strategies):
        mine = {(r.curve, r.noise): r for r in rows if r.strategy == strategy}
        xs = [i + 0.25 * (offset - 1) for i, cell in enumerate(cells) if cell in mine]
        got = [mine[cell] for cell in cells if cell in mine]
        ax.vlines(xs, [r.ratio_p5 for r in got], [r.ratio_median for r in got], alpha=0.6)
        ax.plot(xs, [r.ratio_median for r in got], "o", label=strategy, markersize=4)
    ax.axhline(0.90, linestyle="--", linewidth=0.8, color="grey")
    ax.axhline(0.97, linestyle=":", linewidth=0.8, color="grey")
    ax.set_xticks(range(len(cells)), [f"{c} / {n}" for c, n in cells], rotation=90,
                  fontsize=7)
    ax.set_ylabel("chosen / true best (p5 to median)")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def prediction_goals(rows: list[PredictionRow]) -> list[str]:
    """Per noise regime and goal, MET when every curve's MAPE (against the median of the
    held-out level's windows) is within it, with the worst cell."""
    lines = []
    for noise in dict.fromkeys(r.noise for r in rows):
        cell = [r for r in rows if r.noise == noise]
        for key, name, goal in PREDICTION_GOALS:
            worst = max(cell, key=lambda r: r.mape[key])
            verdict = "MET" if worst.mape[key] <= goal else "MISSED"
            lines.append(f"- {name} <= {goal:.0%} at {noise}: **{verdict}** (worst cell: "
                         f"{worst.curve} {worst.mape[key]:.1%})")
    return lines


def main_predict(args: argparse.Namespace) -> None:
    """The prediction table of every numeric curve (``--curves``) at every ``--noise``."""
    shapes, began = curves(), time.monotonic()
    names = [n for n in (args.curves or ",".join(shapes)).split(",")
             if not shapes[n].categorical]
    rows = [simulate_prediction(shapes[name], REGIMES[noise], args.predict_reps)
            for noise in args.noise.split(",") for name in names]
    print(markdown(rows, PREDICTION_HEADER))
    print()
    print("\n".join(prediction_goals(rows)))
    print(f"\n{len(rows)} prediction cells x {args.predict_reps} repetitions in "
          f"{time.monotonic() - began:.0f} s")


def _sweep_cell(curve: str, noise: str, strategy: str, reps: int, budget_min: float) -> Row:
    """One sweep cell (by names, so that a worker process can run it)."""
    return simulate(curves()[curve], REGIMES[noise], strategy, reps, budget_min=budget_min)


def _tune_cell(surface: str, noise: str, reps: int, n_trials: int) -> TuneRow:
    """One tune cell (by names, so that a worker process can run it)."""
    return simulate_tune(surfaces()[surface], REGIMES[noise], reps, n_trials=n_trials)


def main_tune(args: argparse.Namespace) -> None:
    """Run the tune's cells (``--jobs`` at a time) and print its table."""
    names = args.curves.split(",") if args.curves else list(surfaces())
    cells = [(name, noise, args.reps, args.n_trials) for name in names
             for noise in args.noise.split(",")]
    began = time.monotonic()
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        rows = list(pool.map(_tune_cell, *zip(*cells, strict=True)))
    print(markdown(rows, TUNE_HEADER))
    print()
    print("\n".join(tune_goals(rows)))
    print()
    print("\n".join(wrong_cases(rows)))
    print(f"\n{len(rows)} cells x {args.reps} repetitions (tpe, {args.n_trials} trials) in "
          f"{time.monotonic() - began:.0f} s")


def main() -> None:
    """Run the cells and print the table and the verdicts."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=300)
    parser.add_argument("--curves", default=None, help="default: every curve (--tune: "
                        "every numeric one)")
    parser.add_argument("--noise", default=",".join(REGIMES))
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--png", default=None, help="write the plot here")
    parser.add_argument("--tune", action="store_true", help="the tune's table instead")
    parser.add_argument("--n-trials", type=int, default=12, help="--tune: the trial budget")
    parser.add_argument("--jobs", type=int, default=1, help="cells at a time (processes)")
    parser.add_argument("--predict", action="store_true",
                        help="the fitted curve's prediction table alone")
    parser.add_argument("--predict-reps", type=int, default=100,
                        help="repetitions per prediction cell (0: no prediction table "
                        "after the sweep table)")
    args = parser.parse_args()
    if args.tune:
        main_tune(args)
        return
    if args.predict:
        main_predict(args)
        return
    args.curves = args.curves or ",".join(curves())
    names, began = args.curves.split(","), time.monotonic()
    cells = [(name, noise, strategy, args.reps, BUDGET_MIN) for name in names
             for noise in args.noise.split(",") for strategy in args.strategies.split(",")]
    if DEFAULT in args.strategies.split(",") and "cv30+collapse" in args.noise.split(","):
        cells += [(name, "cv30+collapse", DEFAULT, args.reps, 3 * BUDGET_MIN) for name in names]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        done = list(pool.map(_sweep_cell, *zip(*cells, strict=True)))
    rows = [row for row, cell in zip(done, cells, strict=True) if cell[4] == BUDGET_MIN]
    loud = [row for row, cell in zip(done, cells, strict=True) if cell[4] != BUDGET_MIN]
    print(markdown(rows))
    print(f"\nCV 30% + collapses at 3x the default budget ({3 * BUDGET_MIN:g} min), "
          f"{DEFAULT}:\n")
    print(markdown(loud))
    print()
    for line in depths(rows):
        print(line)
    print()
    print("\n".join(goals(rows, loud)))
    print(f"\n{len(rows)} cells x {args.reps} repetitions in "
          f"{time.monotonic() - began:.0f} s")
    if args.png:
        plot(rows, args.png)
    if args.predict_reps:
        print()
        main_predict(args)


if __name__ == "__main__":
    main()
