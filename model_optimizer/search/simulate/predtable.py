"""How well the fitted curve predicts levels it did not measure (issue 35 item 4).

One repetition: a scan server launched at the top level (the curve's OOM ceiling when it has
one), the probe-fit's coarse levels (:func:`~model_optimizer.search.sweep.fitscan.coarse_levels`)
measured in :data:`REFERENCE_WINDOWS` interleaved rounds (up, down, up, ...), each window
reading throughput and TTFT p50/p99 under the bench's noise (:func:`read_window`). Then,
**leaving one level out** at a time (every level but the lowest and the highest: the fit
interpolates), the curve is fitted (:func:`~model_optimizer.search.sweep.predict.fit_curve`) on
the first :data:`FIT_ROUNDS` rounds of the other levels (the up and down windows a probe-fit
scan takes) and predicts the held-out level. Its absolute percentage error is taken against
the **median of the held-out level's windows** (what a measurement would say; throughput
predicted at the windows' median minute, with the fitted drift) and against the **truth**
of this server (its launch offset included, drift removed).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from model_optimizer.search.simulate.bench import Bench, Noise, Server, lognormal
from model_optimizer.search.simulate.truth import Curve
from model_optimizer.search.sweep.fitscan import coarse_levels
from model_optimizer.search.sweep.predict import DEFAULT, Model, Observed, fit_curve

FIT_ROUNDS, REFERENCE_WINDOWS = 2, 5
#: a window's TTFT p99 rests on its slowest requests: noisier than its p50
P99_NOISE = 1.5
FIGURES = ("qps", "ttft_p50_ms", "ttft_p99_ms")


def read_window(server: Server, value: int) -> Observed:
    """One window at ``value`` in flight: the true throughput times the server's factor
    (offset, drift, window noise, collapses: ``bench.Server``); each TTFT quantile the truth
    divided by the same factor (what slows a window's throughput slows its latency) times
    its own sampling noise (p99: :data:`P99_NOISE` times the CV)."""
    bench, curve = server.bench, server.bench.curve
    minute = (bench.clock - server.born) / 60.0
    true = curve.throughput(value)
    reading, p50_noise = server.read(true, 1.0)
    factor = reading / true
    p99_noise = lognormal(bench.rng, P99_NOISE * bench.noise.cv)
    return Observed(value, reading, curve.ttft_ms(value, 0.5) / factor * p50_noise,
                    curve.ttft_ms(value, 0.99) / factor * p99_noise, minute)


def scan(bench: Bench, levels: list[int], rounds: int) -> tuple[Server, list[list[Observed]]]:
    """``rounds`` interleaved passes over ``levels`` on one server (odd passes downwards);
    the windows per pass."""
    server = bench.launch(levels[-1])
    passes = []
    for number in range(rounds):
        order = levels if number % 2 == 0 else list(reversed(levels))
        passes.append([read_window(server, value) for value in order])
    return server, passes


@dataclass(frozen=True)
class HeldOut:
    """One level left out of the fit: the fit's prediction for the held-out windows
    (``later``: at their median minute with a linear drift, over their passes with per-pass
    factors) and drift removed (``now``), and the held-out level's own windows, the
    reference."""

    level: int
    later: dict[str, float | None]
    now: dict[str, float | None]
    windows: list[Observed]

    def measured(self, key: str) -> float | None:
        """The median of the held-out windows' ``key`` (None when none has it)."""
        values = [getattr(o, key) for o in self.windows if getattr(o, key) is not None]
        return statistics.median(values) if values else None

    def errors(self) -> dict[str, float]:
        """Each figure's absolute percentage error against the median of its windows, each
        predicted for those windows (the first model's TTFT has no drift: it is drift
        removed, ``FittedCurve.ttft_ms``)."""
        row = {}
        for key in FIGURES:
            measured = self.measured(key)
            predicted = self.later.get(key)
            if measured and predicted is not None:
                row[key] = abs(predicted - measured) / measured
        return row


def held_out(passes: list[list[Observed]], levels: list[int], *,
             rounds: int | None = FIT_ROUNDS, model: Model = DEFAULT) -> list[HeldOut]:
    """Leave one level out at a time (every level but the lowest and the highest: the fit
    interpolates): fit ``model`` on the first ``rounds`` passes of the other levels (None:
    every pass, so that the fit spans the time of the reference windows) and predict the
    held-out one. Each window's ``run`` is its pass. Shared by the simulator and the
    real-engine benchmark."""
    passes = [[replace(o, run=number) for o in window] for number, window in enumerate(passes)]
    found = []
    for held in levels[1:-1]:
        # a fit of its own: the held-out windows shape nothing, not even the robust scale
        fitted = fit_curve([o for window in passes[:rounds] for o in window
                            if o.value != held], model=model)
        windows = [o for window in passes for o in window if o.value == held]
        if fitted is None or not windows:
            continue
        minute = statistics.median(o.minute for o in windows)
        found.append(HeldOut(held, fitted.predict(held, minute, [o.run for o in windows]),
                             fitted.predict(held), windows))
    return found


def held_out_errors(curve: Curve, noise: Noise, seed: int, *, rounds: int | None = FIT_ROUNDS,
                    model: Model = DEFAULT) -> list[dict[str, float]]:
    """One repetition: per held-out level, each figure's absolute percentage error against
    the median of its windows (``qps``...) and against the truth (``qps_truth``...)."""
    bench = Bench(curve, noise, seed)
    levels = coarse_levels(curve.low, curve.launch_ceiling or curve.high)
    server, passes = scan(bench, levels, REFERENCE_WINDOWS)
    errors = []
    for found in held_out(passes, levels, rounds=rounds, model=model):
        held, now = found.level, found.now
        truth = {"qps": curve.throughput(held) * server.offset,
                 "ttft_p50_ms": curve.ttft_ms(held, 0.5) / server.offset,
                 "ttft_p99_ms": curve.ttft_ms(held, 0.99) / server.offset}
        row = found.errors()
        for key in FIGURES:
            row[f"{key}_truth"] = abs(now[key] - truth[key]) / truth[key]
        errors.append(row)
    return errors


@dataclass(frozen=True)
class PredictionRow:
    """One (curve, noise) cell: MAPE of each figure against the held-out windows' median
    and against the truth, and the 90th percentile of the throughput's error."""

    curve: str
    noise: str
    reps: int
    predictions: int
    mape: dict[str, float]

    def cells(self) -> list[str]:
        """The markdown cells, in :data:`PREDICTION_HEADER` order."""
        shown = [f"{self.mape[key] * 100:.1f}%" for key in PREDICTION_KEYS]
        return [self.curve, self.noise, str(self.reps), str(self.predictions), *shown]


PREDICTION_KEYS = ("qps", "ttft_p50_ms", "ttft_p99_ms", "qps_p90", "qps_truth",
                   "ttft_p50_ms_truth")
PREDICTION_HEADER = ["curve", "noise", "reps", "held-out predictions", "throughput MAPE",
                     "TTFT p50 MAPE", "TTFT p99 MAPE", "throughput APE p90",
                     "throughput vs truth", "TTFT p50 vs truth"]


def simulate_prediction(curve: Curve, noise: Noise, reps: int, *, seed0: int = 0,
                        rounds: int | None = FIT_ROUNDS,
                        model: Model = DEFAULT) -> PredictionRow:
    """``reps`` seeded repetitions of one cell, summarised (MAPE: the mean over every
    held-out level of every repetition)."""
    rows = [row for rep in range(reps)
            for row in held_out_errors(curve, noise, seed0 + rep, rounds=rounds, model=model)]
    mape = {key: statistics.fmean(r[key] for r in rows)
            for key in PREDICTION_KEYS if key != "qps_p90"}
    ordered = sorted(r["qps"] for r in rows)
    mape["qps_p90"] = ordered[int(0.9 * (len(ordered) - 1))]
    return PredictionRow(curve.name, noise.name, reps, len(rows), mape)
