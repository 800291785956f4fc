"""Predictions from the fitted curve: throughput and TTFT p50/p99 at levels not measured.

**Throughput** is the Universal Scalability Law of :mod:`model_optimizer.search.core.fit`, fitted
to every window, its band the 5th..95th percentile of refits on windows drawn with
replacement. The server's drift is, by :class:`Model`:

- ``linear`` (the knee fit's own): a straight line in minutes, ``log X_obs = log X(N) +
  drift * t``; "drift removed" is the server at minute 0;
- ``runs``: one factor per pass (``Observed.run``) when the windows come in passes that each
  cover at least three levels (interleaved up and down passes, as a probe-fit scan and the
  held-out protocol take them), the factors' mean (in logs) pinned at zero, so "drift
  removed" is the server as it was over the windows fitted. A factor per pass can bend
  (fast, slower, back) where a line cannot, and cannot eat the curve's shape: within a pass
  it is one constant over every level. With one pass, or passes of fewer than three levels,
  it falls back to ``linear``.

**TTFT** comes from Little's law: in a closed loop at N in flight the mean time a request
spends in the server is ``N / X``. Each quantile is modelled, by :class:`Model`, as

- ``little`` (the first model): ``TTFT_q = beta + alpha * N / X(N)``, ``X`` the fitted curve
  with the drift removed, in the fit and the prediction alike;
- ``window``: the same form on each window's own ``N / X_obs`` (what slowed that window's
  throughput lengthened its TTFT), predicted at the server's speed of the prediction;
- ``hinge``: ``window`` plus a queue, ``gamma * max(0, N - cap) / X`` (``gamma >= 0``; the
  ``cap`` of :data:`CAPS` tried between the second and the last-but-one level that fits
  best): Little's law on the requests beyond a cap, so TTFT's share of ``N / X`` grows once
  a queue forms (a KV cap; on a real server, new prefills waiting behind the batch's
  decode steps);
- ``interp``: ``window``, then times its residual ratio at the measured levels (their mean
  in logs, collapsed windows down-weighted), interpolated linearly in ``log N`` between
  the two measured levels around the one predicted (held at the ends): the measured TTFT
  itself where it was measured, the model's shape between. At zero noise on the model's
  own form every ratio is 1 and the prediction is the model's;
- ``hinge-interp``: ``hinge``, then its ratios interpolated as ``interp`` does.

All are fitted by non-negative least squares on relative residuals, reweighted with the
soft-L1 loss like the throughput fit, so a collapsed window counts little. The default
(:data:`DEFAULT`) is the one the held-out study chose (``docs/benchmarks/fit-prediction.md``).

The levels are concurrencies on one server (probe-fit and probe-scan windows); a window's
time is its order in the scan (``minute``).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy
from scipy.optimize import nnls

from model_optimizer.search.core.fit import (
    BOOTSTRAP,
    MIN_WINDOWS,
    Window,
    solve_weighted,
)
from model_optimizer.search.core.fit import fit_params as fit_throughput
from model_optimizer.search.core.robust import ITERATIONS, SCALE

LATENCIES = ("ttft_p50_ms", "ttft_p99_ms")
TTFT_WORDS = {"little": "beta_q + alpha_q * N / X(N)",
              "window": "beta_q + alpha_q * N / X(N), fitted on each window's own N / X",
              "hinge": "beta_q + alpha_q * N / X(N) + gamma_q * max(0, N - cap) / X(N)",
              "hinge-interp": "beta_q + alpha_q * N / X(N) + gamma_q * max(0, N - cap) / "
                              "X(N), times its ratio to the measured levels interpolated "
                              "in log N",
              "interp": "beta_q + alpha_q * N / X(N), times its ratio to the measured "
                        "levels interpolated in log N"}
BAND = (0.05, 0.95)


@dataclass(frozen=True)
class Observed:
    """One measured window: the level, its throughput and TTFT quantiles, its minute."""

    value: float
    qps: float
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    minute: float = 0.0
    run: int = 0                     # the pass it was taken in (``runs`` drift)


DRIFTS = ("linear", "runs")
TTFTS = ("little", "window", "hinge", "interp", "hinge-interp")
#: caps of the queue term tried, geometric between the second and the last-but-one level
CAPS = 32


@dataclass(frozen=True)
class Model:
    """Which drift and which TTFT model a fit uses (see the module's docstring)."""

    drift: str = "runs"
    ttft: str = "hinge-interp"

    def __post_init__(self) -> None:
        if self.drift not in DRIFTS or self.ttft not in TTFTS:
            raise ValueError(f"unknown model {self.drift}:{self.ttft}")

    @classmethod
    def parse(cls, text: str) -> Model:
        """``drift:ttft``, e.g. ``runs:interp``."""
        drift, _, ttft = text.partition(":")
        return cls(drift, ttft)

    def name(self) -> str:
        """``drift:ttft``."""
        return f"{self.drift}:{self.ttft}"


#: the first model (issue 35 item 4, 2026-12-05): a straight drift, a fixed share of N / X
FIRST = Model("linear", "little")
#: what a fit uses unless told
DEFAULT = Model("runs", "hinge-interp")


def queue(n: numpy.ndarray, u: numpy.ndarray, cap: float) -> numpy.ndarray:
    """Little's law on the requests beyond ``cap``: ``max(0, N - cap) / X`` with
    ``X = N / u``."""
    return numpy.maximum(n - cap, 0.0) * u / n


def fit_latency(u: numpy.ndarray, y: numpy.ndarray, counts: numpy.ndarray,
                waiting: numpy.ndarray | None = None
                ) -> tuple[numpy.ndarray, numpy.ndarray, float]:
    """(alpha, beta, gamma) of ``y = beta + alpha * u + gamma * waiting`` (all >= 0; gamma 0
    without ``waiting``, the :func:`queue` beyond a cap): non-negative least squares on
    relative residuals, reweighted with the soft-L1 loss in log space; ``counts`` weighs
    each window (a bootstrap draw; 0 leaves it out). Also the final weights (counts times
    the robust weight) and the soft-L1 loss at the fixed scale :data:`~.fit.SCALE` (to
    compare caps)."""
    columns = [u, numpy.ones_like(u)] + ([waiting] if waiting is not None else [])
    design = numpy.column_stack(columns)
    robust = numpy.ones_like(y)
    coef = numpy.zeros(design.shape[1])
    residual = numpy.zeros_like(y)
    for _ in range(ITERATIONS):
        root = numpy.sqrt(counts * robust) / y
        coef, _ = nnls(design * root[:, None], y * root)
        residual = numpy.log(numpy.maximum(design @ coef, 1e-9) / y)
        kept = residual[counts > 0].tolist()  # a list: numpy's median is slow on a few
        middle = statistics.median(kept)
        scale = max(SCALE, 1.4826 * statistics.median(abs(r - middle) for r in kept))
        robust = 1.0 / numpy.sqrt(1.0 + (residual / scale) ** 2)
    loss = float((counts * (numpy.sqrt(1.0 + (residual / SCALE) ** 2) - 1.0)).sum())
    return numpy.append(coef, 0.0)[:3], counts * robust, loss


def base(coef: numpy.ndarray, cap: numpy.ndarray, n: numpy.ndarray, u: numpy.ndarray
         ) -> numpy.ndarray:
    """``beta + alpha * u + gamma * queue(N, u, cap)`` per row of ``coef`` and ``cap``."""
    held = numpy.where(numpy.isfinite(cap), cap, numpy.inf)[:, None]
    waiting = numpy.maximum(n - held, 0.0) * u / n
    return coef[:, 1:2] + coef[:, 0:1] * u + coef[:, 2:3] * waiting


@dataclass(frozen=True)
class LatencyFit:
    """One TTFT quantile's fit, one row per throughput row: (alpha, beta, gamma), the cap
    of the queue term (inf: none), and the log residual ratio at each measured level
    (``interp``; zeros otherwise)."""

    coef: numpy.ndarray
    cap: numpy.ndarray
    levels: numpy.ndarray
    ratio: numpy.ndarray

    def at(self, u: numpy.ndarray, n: numpy.ndarray, rows: slice) -> numpy.ndarray:
        """The quantile (ms) at ``u = N / X`` (rows x levels) and levels ``n``."""
        coef, cap = self.coef[rows], self.cap[rows]
        y = base(coef, cap, n, u)
        logs = numpy.log(self.levels)
        ratio = numpy.array([numpy.interp(numpy.log(n), logs, row)
                             for row in self.ratio[rows]])
        return y * numpy.exp(ratio)


@dataclass(frozen=True)
class FittedCurve:
    """The fitted throughput (row 0 of ``params``: a, b, c, drift per minute; the other rows
    bootstrap refits), the log factor of each pass (``runs``: rows x passes, empty with a
    linear drift) and, per TTFT quantile with measurements, its :class:`LatencyFit`."""

    params: numpy.ndarray
    latency: dict[str, LatencyFit]
    windows: int
    levels: tuple[float, ...]
    model: Model = FIRST
    runs: dict[int, numpy.ndarray] = field(default_factory=dict)

    def factor(self, minute: float = 0.0, runs: Sequence[int] | None = None,
               rows: slice = slice(0, 1)) -> numpy.ndarray:
        """The server's speed factor (a column, one per row): with per-pass factors the
        median over ``runs`` of theirs (1, their mean, for a pass not fitted; 1 without
        ``runs``), else the linear drift at ``minute`` (1 at minute 0)."""
        p = self.params[rows]
        if not self.runs:
            return numpy.exp(p[:, 3:4] * minute)
        if not runs:
            return numpy.ones((len(p), 1))
        logs = numpy.column_stack([self.runs[r][rows] if r in self.runs
                                   else numpy.zeros(len(p)) for r in runs])
        return numpy.exp(numpy.median(logs, axis=1, keepdims=True))

    def throughput(self, n, minute: float = 0.0, rows: slice = slice(0, 1),
                   runs: Sequence[int] | None = None) -> numpy.ndarray:
        """Fitted req/s at levels ``n`` (rows x levels), at ``minute`` of the server's life
        or over passes ``runs`` (:meth:`factor`; neither: drift removed)."""
        n = numpy.atleast_1d(numpy.asarray(n, dtype=float))
        p = self.params[rows]
        inverse = p[:, 0:1] / n + p[:, 1:2] + p[:, 2:3] * n
        return self.factor(minute, runs, rows) / numpy.maximum(inverse, 1e-12)

    def ttft_ms(self, key: str, n, rows: slice = slice(0, 1), minute: float = 0.0,
                runs: Sequence[int] | None = None) -> numpy.ndarray | None:
        """Predicted TTFT quantile ``key`` (ms) at levels ``n`` (rows x levels), the server
        as :meth:`throughput` says (``little``: always drift removed); None when no window
        measured it."""
        fitted = self.latency.get(key)
        if fitted is None:
            return None
        n = numpy.atleast_1d(numpy.asarray(n, dtype=float))
        if self.model.ttft == "little":
            minute, runs = 0.0, None
        u = n / self.throughput(n, minute, rows, runs)
        return fitted.at(u, n, rows)

    def predict(self, n: float, minute: float = 0.0,
                runs: Sequence[int] | None = None) -> dict[str, float | None]:
        """Point predictions at one level: ``qps`` and each TTFT quantile, at ``minute`` or
        over passes ``runs`` (neither: drift removed)."""
        out: dict[str, float | None] = {
            "qps": float(self.throughput(n, minute, runs=runs)[0, 0])}
        for key in LATENCIES:
            found = self.ttft_ms(key, n, minute=minute, runs=runs)
            out[key] = None if found is None else float(found[0, 0])
        return out


def fit_runs(observed: Sequence[Observed], counts: numpy.ndarray
             ) -> tuple[numpy.ndarray, dict[int, numpy.ndarray]]:
    """The USL's linear form with one log factor per pass (their weighted mean 0), per
    row of ``counts``: weighted least squares on relative residuals, soft-L1 reweighted,
    alternating with the factors (each the weighted mean log residual of its pass). Returns
    (a, b, c, 0) per row and each pass's log factors."""
    n = numpy.array([o.value for o in observed], dtype=float)
    inverse = 1.0 / numpy.array([max(o.qps, 1e-9) for o in observed])
    passes = sorted({o.run for o in observed})
    member = numpy.array([[o.run == r for r in passes] for o in observed], dtype=float)
    design = numpy.column_stack([1.0 / n, numpy.ones_like(n), n])
    robust, logs = numpy.ones_like(counts), numpy.zeros((len(counts), len(passes)))
    coef = numpy.zeros((len(counts), 3))
    for _ in range(ITERATIONS):
        shift = logs @ member.T
        corrected = inverse * numpy.exp(shift)
        coef = solve_weighted(design, corrected, counts * robust / corrected ** 2)
        residual = numpy.log(numpy.maximum(coef @ design.T, 1e-12) / inverse)
        weight = counts * robust
        logs = (weight * residual) @ member / numpy.maximum(weight @ member, 1e-12)
        logs -= ((weight * (logs @ member.T)).sum(axis=1)
                 / numpy.maximum(weight.sum(axis=1), 1e-12))[:, None]
        left = residual - logs @ member.T
        scale = numpy.maximum(SCALE, 1.4826 * numpy.median(
            numpy.abs(left - numpy.median(left, axis=1, keepdims=True)), axis=1))
        robust = 1.0 / numpy.sqrt(1.0 + (left / scale[:, None]) ** 2)
    params = numpy.column_stack([coef, numpy.zeros(len(counts))])
    return params, {r: logs[:, i] for i, r in enumerate(passes)}


def _passes_fit(observed: Sequence[Observed]) -> bool:
    """Per-pass factors are identifiable: at least two passes, each over three levels."""
    levels: dict[int, set[float]] = {}
    for o in observed:
        levels.setdefault(o.run, set()).add(o.value)
    return len(levels) >= 2 and all(len(v) >= 3 for v in levels.values())


def _fit_quantile(model: Model, n: numpy.ndarray, u: numpy.ndarray, y: numpy.ndarray,
                  counts: numpy.ndarray) -> LatencyFit:
    """One TTFT quantile's :class:`LatencyFit` over the rows of ``u`` and ``counts``."""
    levels = numpy.array(sorted(set(n.tolist())))
    coefs, caps, ratios = [], [], []
    for row in range(len(counts)):
        coef, weight, loss = fit_latency(u[row], y, counts[row])
        cap = numpy.inf
        if model.ttft in ("hinge", "hinge-interp") and len(levels) >= 4:
            for at in numpy.geomspace(levels[1], levels[-2], CAPS):  # inside the range
                found = fit_latency(u[row], y, counts[row], queue(n, u[row], float(at)))
                if found[2] < loss and found[0][2] > 0:
                    (coef, weight, loss), cap = found, float(at)
        ratio = numpy.zeros(len(levels))
        if model.ttft in ("interp", "hinge-interp"):
            fitted = base(coef[None, :], numpy.array([cap]), n, u[row])[0]
            residual = numpy.log(y / numpy.maximum(fitted, 1e-9))
            for i, level in enumerate(levels):
                mine = (n == level) & (weight > 0)
                if mine.any():
                    ratio[i] = numpy.average(residual[mine], weights=weight[mine])
        coefs.append(coef)
        caps.append(cap)
        ratios.append(ratio)
    return LatencyFit(numpy.array(coefs), numpy.array(caps), levels, numpy.array(ratios))


def fit_curve(observed: Sequence[Observed], *, bootstrap: int = 0, seed: int = 0,
              model: Model = DEFAULT) -> FittedCurve | None:
    """The fitted curve of ``observed`` (row 0) and ``bootstrap`` refits on windows drawn with
    replacement (the band), by ``model``; None with fewer than :data:`~.fit.MIN_WINDOWS`
    windows or fewer than three levels, the throughput fit's own bounds."""
    levels = sorted({o.value for o in observed})
    if len(observed) < MIN_WINDOWS or len(levels) < 3:
        return None
    count = len(observed)
    counts = numpy.ones((1, count))
    if bootstrap:
        rng = numpy.random.default_rng(seed)
        draws = rng.multinomial(count, [1 / count] * count, size=bootstrap).astype(float)
        counts = numpy.vstack([counts, draws])
    runs: dict[int, numpy.ndarray] = {}
    if model.drift == "runs" and _passes_fit(observed):
        params, runs = fit_runs(observed, counts)
    else:
        drift = len(levels) < count  # repeats make drift visible, as fit.fit_knee decides
        windows = [Window(o.value, o.qps, o.minute) for o in observed]
        params = fit_throughput(windows, drift, counts)
    curve = FittedCurve(params, {}, count, tuple(levels), model, runs)
    n = numpy.array([o.value for o in observed], dtype=float)
    qps = numpy.array([o.qps for o in observed], dtype=float)
    for key in LATENCIES:
        y = numpy.array([getattr(o, key) or numpy.nan for o in observed], dtype=float)
        measured = numpy.isfinite(y) & (y > 0)
        if measured.sum() < 2:
            continue
        if model.ttft == "little":
            u = n[measured] / curve.throughput(n[measured], rows=slice(None))
        else:   # each window's own N / X: Little's law on what that window did
            u = numpy.tile(n[measured] / numpy.maximum(qps[measured], 1e-9),
                           (len(counts), 1))
        curve.latency[key] = _fit_quantile(model, n[measured], u, y[measured],
                                           counts[:, measured])
    return curve


def curve_record(curve: FittedCurve, grid: Sequence[float], metric: str = "qps") -> dict:
    """What an archive keeps of a fitted curve (``summary.json`` ``fit``): the model, and
    over ``grid`` the predicted throughput (under ``metric``, the figure fitted) and TTFT
    quantiles with their bands."""
    xs = [float(x) for x in grid]
    drift = curve.model.drift if curve.runs or curve.model.drift != "runs" else (
        "linear: too few passes of three levels for one factor each")
    record: dict = {"model": f"USL {metric} (drift removed, {drift}); TTFT_q "
                             f"from Little's law on the fitted {metric} "
                             f"({curve.model.ttft}: {TTFT_WORDS[curve.model.ttft]})",
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


#: phases that continue the pass before them (the up pass's bisection of its ceiling)
SAME_PASS = {"ceiling": "scan-up", "bisect": "grow"}


def pass_numbers(phases: Sequence[str | None], values: Sequence[object]) -> list[int]:
    """Each row's pass, from its phase and level in the order measured: a new pass where
    the phase changes (``ceiling`` bisection stays in the up pass), and a pass over fewer
    than three levels joined to the pass before it (``runs`` drift fits a factor only to a
    pass over three levels or more)."""
    numbers, current, last = [], -1, object()
    for phase in phases:
        phase = SAME_PASS.get(phase or "", phase)
        if phase != last:
            current, last = current + 1, phase
        numbers.append(current)
    levels: dict[int, set] = {}
    for number, value in zip(numbers, values, strict=True):
        levels.setdefault(number, set()).add(value)
    merged: dict[int, int] = {}
    for number in sorted(levels):
        small = len(levels[number]) < 3 and number > 0
        merged[number] = merged[number - 1] if small else number
    return [merged[n] for n in numbers]


def sweep_fit(rows: Sequence[dict], window_minutes: float, *, metric: str = "qps",
              bootstrap: int = BOOTSTRAP, model: Model = DEFAULT) -> dict | None:
    """The fitted curve of a probe sweep's windows (``summary.json`` rows: each a window
    at concurrency ``value`` on one server, timed by its step and in the pass of its
    phase, :func:`pass_numbers`; ``metric``: the sweep's objective, as its knee is fitted),
    as :func:`curve_record` over :func:`prediction_grid`; None when there is too little to
    fit."""
    observed = []
    passes = pass_numbers([row.get("phase") for row in rows],
                          [row.get("value") for row in rows])
    for row, run in zip(rows, passes, strict=True):
        value, qps = _number(row.get("value")), _number(row.get(metric))
        if row.get("status") == "ok" and value is not None and qps is not None:
            observed.append(Observed(value, qps, _number(row.get("ttft_p50_ms")),
                                     _number(row.get("ttft_p99_ms")),
                                     (int(row.get("step") or 1) - 1) * window_minutes, run))
    curve = fit_curve(observed, bootstrap=bootstrap, model=model)
    return None if curve is None else curve_record(curve, prediction_grid(curve.levels),
                                                   metric)


__all__ = ["BOOTSTRAP", "DEFAULT", "FIRST", "FittedCurve", "LatencyFit", "Model", "Observed",
           "curve_record", "fit_curve", "fit_latency", "fit_runs", "pass_numbers",
           "prediction_grid", "sweep_fit"]
