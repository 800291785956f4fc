"""Predictions from the fitted curve: throughput and TTFT p50/p99 at levels not measured.

**Throughput** is the Universal Scalability Law of :mod:`model_optimizer.search.sweep.fit`, fitted
to every window (drift removed, or at a given minute of the server's life with the fitted
drift), its band the 5th..95th percentile of refits on windows drawn with replacement.

**TTFT** comes from the fitted throughput by **Little's law**: in a closed loop at N in
flight the mean time a request spends in the server is exactly ``N / X(N)``. A request's time
to its first token is a share of that (the wait for a batch slot, then the step it is
admitted in and its prefill step), so each quantile is modelled as
``TTFT_q(N) = beta_q + alpha_q * N / X(N)`` with ``alpha_q, beta_q >= 0`` fitted on the
measured windows' TTFT (non-negative least squares on relative residuals, reweighted with
the soft-L1 loss like the throughput fit, so a collapsed window counts little). The form is
exact while the batch holds every request (the step time, and so the TTFT, is proportional
to ``N / X``); beyond a KV cap the queue wait grows as ``(N - cap) / X``, a different slope
the single ``alpha`` averages (the simulator's ``knee-flat`` curve shows what that costs).

The levels are concurrencies on one server (probe-fit and probe-scan windows); a window's
time is its order in the scan (``minute``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy
from scipy.optimize import nnls

from model_optimizer.search.sweep.fit import BOOTSTRAP, ITERATIONS, MIN_WINDOWS, SCALE, Window
from model_optimizer.search.sweep.fit import fit_params as fit_throughput

LATENCIES = ("ttft_p50_ms", "ttft_p99_ms")
BAND = (0.05, 0.95)


@dataclass(frozen=True)
class Observed:
    """One measured window: the level, its throughput and TTFT quantiles, its minute."""

    value: float
    qps: float
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    minute: float = 0.0


def fit_latency(u: numpy.ndarray, y: numpy.ndarray, counts: numpy.ndarray) -> numpy.ndarray:
    """(alpha, beta) of ``y = beta + alpha * u`` (both >= 0): non-negative least squares on
    relative residuals, reweighted with the soft-L1 loss in log space; ``counts`` weighs
    each window (a bootstrap draw; 0 leaves it out)."""
    design = numpy.column_stack([u, numpy.ones_like(u)])
    robust = numpy.ones_like(y)
    coef = numpy.zeros(2)
    for _ in range(ITERATIONS):
        root = numpy.sqrt(counts * robust) / y
        coef, _ = nnls(design * root[:, None], y * root)
        residual = numpy.log(numpy.maximum(design @ coef, 1e-9) / y)
        kept = residual[counts > 0].tolist()  # a list: numpy's median is slow on a few
        middle = statistics.median(kept)
        scale = max(SCALE, 1.4826 * statistics.median(abs(r - middle) for r in kept))
        robust = 1.0 / numpy.sqrt(1.0 + (residual / scale) ** 2)
    return coef


@dataclass(frozen=True)
class FittedCurve:
    """The fitted throughput (row 0 of ``params``: a, b, c, drift per minute; the other rows
    bootstrap refits) and, per TTFT quantile with measurements, (alpha, beta) per row."""

    params: numpy.ndarray
    latency: dict[str, numpy.ndarray]
    windows: int
    levels: tuple[float, ...]

    def throughput(self, n, minute: float = 0.0, rows: slice = slice(0, 1)) -> numpy.ndarray:
        """Fitted req/s at levels ``n`` (rows x levels), at ``minute`` of the server's life
        (0: drift removed)."""
        n = numpy.atleast_1d(numpy.asarray(n, dtype=float))
        p = self.params[rows]
        inverse = p[:, 0:1] / n + p[:, 1:2] + p[:, 2:3] * n
        return numpy.exp(p[:, 3:4] * minute) / numpy.maximum(inverse, 1e-12)

    def ttft_ms(self, key: str, n, rows: slice = slice(0, 1)) -> numpy.ndarray | None:
        """Predicted TTFT quantile ``key`` (ms) at levels ``n`` (rows x levels); None when
        no window measured it."""
        coef = self.latency.get(key)
        if coef is None:
            return None
        n = numpy.atleast_1d(numpy.asarray(n, dtype=float))
        u = n / self.throughput(n, rows=rows)
        return coef[rows, 1:2] + coef[rows, 0:1] * u

    def predict(self, n: float, minute: float = 0.0) -> dict[str, float | None]:
        """Point predictions at one level: ``qps`` (at ``minute``, 0: drift removed) and
        each TTFT quantile."""
        out: dict[str, float | None] = {"qps": float(self.throughput(n, minute)[0, 0])}
        for key in LATENCIES:
            found = self.ttft_ms(key, n)
            out[key] = None if found is None else float(found[0, 0])
        return out


def fit_curve(observed: Sequence[Observed], *, bootstrap: int = 0,
              seed: int = 0) -> FittedCurve | None:
    """The fitted curve of ``observed`` (row 0) and ``bootstrap`` refits on windows drawn with
    replacement (the band); None with fewer than :data:`~.fit.MIN_WINDOWS` windows or
    fewer than three levels, the throughput fit's own bounds."""
    levels = sorted({o.value for o in observed})
    if len(observed) < MIN_WINDOWS or len(levels) < 3:
        return None
    count = len(observed)
    counts = numpy.ones((1, count))
    if bootstrap:
        rng = numpy.random.default_rng(seed)
        draws = rng.multinomial(count, [1 / count] * count, size=bootstrap).astype(float)
        counts = numpy.vstack([counts, draws])
    drift = len(levels) < count  # repeats make drift visible, as fit.fit_knee decides
    windows = [Window(o.value, o.qps, o.minute) for o in observed]
    params = fit_throughput(windows, drift, counts)
    curve = FittedCurve(params, {}, count, tuple(levels))
    n = numpy.array([o.value for o in observed])
    for key in LATENCIES:
        y = numpy.array([getattr(o, key) or numpy.nan for o in observed], dtype=float)
        measured = numpy.isfinite(y) & (y > 0)
        if measured.sum() < 2:
            continue
        u = n[measured] / curve.throughput(n[measured], rows=slice(None))
        curve.latency[key] = numpy.array([
            fit_latency(u[row], y[measured], counts[row, measured]) for row in range(len(u))])
    return curve


def curve_record(curve: FittedCurve, grid: Sequence[float], metric: str = "qps") -> dict:
    """What an archive keeps of a fitted curve (``summary.json`` ``fit``): the model, and
    over ``grid`` the predicted throughput (under ``metric``, the figure fitted) and TTFT
    quantiles with their bands."""
    xs = [float(x) for x in grid]
    record: dict = {"model": f"USL {metric} (drift removed); TTFT_q = beta_q + alpha_q * "
                             f"N / X(N) (Little's law on the fitted {metric})",
                    "metric": metric, "windows": curve.windows, "levels": list(curve.levels),
                    "grid": xs, "band": list(BAND), "bootstrap": len(curve.params) - 1}
    series = {metric: curve.throughput(xs, rows=slice(None))}
    series.update({key: found for key in LATENCIES
                   if (found := curve.ttft_ms(key, xs, rows=slice(None))) is not None})
    for key, rows in series.items():
        record[key] = [round(float(v), 4) for v in rows[0]]
        if len(rows) > 1:
            low, high = numpy.quantile(rows[1:], BAND, axis=0)
            record[f"{key}_low"] = [round(float(v), 4) for v in low]
            record[f"{key}_high"] = [round(float(v), 4) for v in high]
    return record


def prediction_grid(levels: Sequence[float]) -> list[int]:
    """The measured levels and, between each two, the geometric midpoint (rounded; the
    levels a report predicts without having measured them)."""
    measured = sorted({int(v) for v in levels})
    between = {round((low * high) ** 0.5)
               for low, high in zip(measured, measured[1:], strict=False)}
    return sorted(set(measured) | {v for v in between if v not in measured})


def _number(value) -> float | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value > 0
    return float(value) if ok else None


def sweep_fit(rows: Sequence[dict], window_minutes: float, *, metric: str = "qps",
              bootstrap: int = BOOTSTRAP) -> dict | None:
    """The fitted curve of a probe sweep's windows (``summary.json`` rows: each a window
    at concurrency ``value`` on one server, timed by its step; ``metric``: the sweep's
    objective, as its knee is fitted), as :func:`curve_record` over
    :func:`prediction_grid`; None when there is too little to fit."""
    observed = []
    for row in rows:
        value, qps = _number(row.get("value")), _number(row.get(metric))
        if row.get("status") == "ok" and value is not None and qps is not None:
            observed.append(Observed(value, qps, _number(row.get("ttft_p50_ms")),
                                     _number(row.get("ttft_p99_ms")),
                                     (int(row.get("step") or 1) - 1) * window_minutes))
    curve = fit_curve(observed, bootstrap=bootstrap)
    return None if curve is None else curve_record(curve, prediction_grid(curve.levels),
                                                   metric)


__all__ = ["BOOTSTRAP", "FittedCurve", "Observed", "curve_record", "fit_curve",
           "fit_latency", "prediction_grid", "sweep_fit"]
