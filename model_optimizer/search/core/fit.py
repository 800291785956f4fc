"""Knees from a fitted curve: one saturating model over every window of a search.

The Universal Scalability Law X(N) = lam N / (1 + sigma (N-1) + kappa N (N-1)), with a drift
term for a server that speeds up or slows down over its life, is fitted to all windows (scan
levels, repeats, bisection points). Its reciprocal is linear,
``1/X = a/N + b + c N`` (``a = (1-sigma)/lam``, ``b = (sigma-kappa)/lam``, ``c = kappa/lam``),
so the fit is a non-negative least-squares solve (``scipy.optimize.nnls``) on relative
residuals, iteratively reweighted with the soft-L1 loss in log space: a window that collapsed
to a fraction of the truth barely moves it. The drift is the robust slope of the log
residuals over the window's time ``t`` (minutes since the first window):
``log X_obs = log X(N) + drift * t``; every bootstrap refit is solved in one batch.

The knee is the smallest grid value whose fitted throughput (drift removed) is within
``plateau_threshold`` of the fitted maximum over the measured range. A bootstrap over
windows (refit on windows drawn with replacement) gives the knee's band and the lowest share
of the maximum the chosen value reaches over the refits (reported). The choice is
**resolved** when the windows rule out, by the robust likelihood-ratio test of
:mod:`~model_optimizer.search.core.sharetest` at one-sided 97.5%, every fitted curve that
puts it below ``1 - 1.5 * plateau_threshold`` (0.925 at the default 5%) of that curve's best,
a margin under the 0.90 that would make the choice wrong (until 2026-12-07: the lowest
refit's share, which a flat-looking noisy scan fooled; that module says why). Otherwise the
verdict is ``not resolved at this noise``, with the number of further windows the test
suggests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy
from scipy.optimize import nnls

from model_optimizer.search.core.fitcheck import Misfit, knee_contradicted
from model_optimizer.search.core.robust import (
    ITERATIONS,
    scale_of,
    soft_l1,
    weighted_slope,
)
from model_optimizer.search.core.sharetest import look_alpha, share_test
from model_optimizer.search.core.slocheck import SloCheck

#: resolved: a share below 1 - RESOLVED * threshold is ruled out (``sharetest``)
RESOLVED = 1.5
#: bootstrap refits behind a band
BOOTSTRAP = 40
MIN_WINDOWS = 4


@dataclass(frozen=True)
class Window:
    """One measured window: the value (concurrency), its reading, its time in minutes."""

    value: float
    metric: float
    minute: float = 0.0


@dataclass(frozen=True)
class Knee:
    """A fitted knee, its band and the verdict."""

    value: int
    band: tuple[int, int]            # 5th..95th percentile of the bootstrap knees
    share: float                     # fitted X(value) / fitted maximum
    share_low: float                 # its lowest over the bootstrap
    resolved: bool
    drift_per_10min: float           # fitted relative drift of the server
    windows: int
    more_windows: int = 0            # what the band suggests would resolve it (0: resolved)
    fitted: float = 0.0              # fitted throughput at the knee (drift removed)
    cut: bool = False                # the best may lie above a lowered scan ceiling
    misfit: dict | None = None       # a level the curve misses beyond its noise (fitcheck)
    budget_spent: bool = False       # the time budget ended the scan before it finished
    evidence: tuple[float, float] = (0.0, 0.0)  # the share test's root and its critical value
    bound: float = 0.925             # the share the test rules out below (sharetest)
    slo: dict | None = None          # the SLO over the windows near the knee (slocheck)
    edge: str | None = None          # why the SLO's edge may hide the best (slojudge)
    remeasure: tuple[int, ...] = ()  # levels whose windows would settle the SLO's edge
    window_s: float = 0.0            # a window's seconds in this sweep (median; 0: unknown)

    def to_dict(self) -> dict:
        """JSON form for the archive and the revision."""
        return asdict(self)

    def verdict(self) -> str:
        """One sentence for the terminal and the report (saying so when the budget ended
        the scan)."""
        ended = (f" (the time budget ended the scan at {self.windows} windows)"
                 if self.budget_spent else "")
        return self._words() + ended

    def _words(self) -> str:
        """Resolved, contradicted by its windows, cut by a lowered ceiling, or noisy."""
        band = f"{self.band[0]}..{self.band[1]}"
        if self.resolved:
            clause = f"; {SloCheck.from_dict(self.slo).words()}" if self.slo else ""
            return (f"knee {self.value} (band {band}; a share below {self._bound()} of the "
                    f"fitted best ruled out), resolved over {self.windows} windows{clause}")
        if self.misfit:
            return (f"not resolved: knee {self.value}, but the fitted curve does not describe "
                    f"this server there: {Misfit(**self.misfit).words()}; more windows do "
                    "not fix the model (--strategy probe-scan measures the values)")
        slo = SloCheck.from_dict(self.slo) if self.slo else None
        if slo is not None and not slo.shown:
            return f"not resolved: knee {self.value}, band {band}, but {slo.words()}"
        if self.edge:
            return f"not resolved: knee {self.value}, band {band}, but {self.edge}"
        if self.cut:
            return (f"not resolved: knee {self.value}, band {band}, but the scan ceiling was "
                    "lowered after a launch failed for memory, and the fitted curve may rise "
                    "above it (the best may lie in the range the failure cut off)")
        return (f"not resolved at this noise: knee {self.value}, band {band}, the windows do "
                f"not rule out a curve that puts it below {self._bound()} of its best (the "
                f"refits: as low as {self.share_low:.0%}); about {self.more_windows} more "
                f"windows near the knee{self._minutes()} would resolve it")

    def _minutes(self) -> str:
        """The more windows' time at this sweep's pace (empty when unknown)."""
        if not self.window_s:
            return ""
        minutes = self.more_windows * self.window_s / 60
        return f" (about {minutes:.0f} minutes at this sweep's {self.window_s:.0f} s a window)"

    def with_slo(self, check: SloCheck | None) -> Knee:
        """This knee with the SLO check of its value: not resolved when it is not shown."""
        if check is None:
            return self
        resolved = self.resolved and check.shown
        more = self.more_windows if self.resolved == resolved else check.more_windows()
        return replace(self, slo=asdict(check), resolved=resolved, more_windows=more)

    def with_edge(self, words: str, remeasure: tuple[int, ...], more: int) -> Knee:
        """This knee, not resolved: the range above it may be feasible and hide the best
        (``search/sweep/slojudge.py``; ``words``: why); ``remeasure``: the levels whose
        windows would settle it, ``more``: about how many."""
        return replace(self, edge=words, resolved=False, remeasure=remeasure,
                       more_windows=more)

    def _bound(self) -> str:
        """The share the test rules out below (``sharetest``), as the verdict names it."""
        return f"{self.bound:.1%}"


def usl_inverse(params: numpy.ndarray, n: numpy.ndarray) -> numpy.ndarray:
    """1/X of the USL in its linear form: a/N + b + c N (drift removed)."""
    a, b, c, _ = params
    return a / n + b + c * n


def fit_params(windows: Sequence[Window], drift: bool = True,
               counts: numpy.ndarray | None = None) -> numpy.ndarray:
    """(a, b, c, drift per minute) per row of ``counts`` (how often each window is drawn:
    one row of ones without a bootstrap): the USL's linear form fitted by weighted least
    squares on relative residuals (non-negative: ``scipy.optimize.nnls`` where the plain
    solve goes negative), reweighted with the soft-L1 loss so collapsed windows count
    little; the drift is the robust slope of the log residuals over time."""
    n = numpy.array([w.value for w in windows], dtype=float)
    observed = 1.0 / numpy.array([max(w.metric, 1e-9) for w in windows])
    minutes = numpy.array([w.minute for w in windows], dtype=float)
    counts = numpy.ones((1, len(n))) if counts is None else counts
    design = numpy.column_stack([1.0 / n, numpy.ones_like(n), n])
    robust, slope = numpy.ones_like(counts), numpy.zeros(len(counts))
    coef = numpy.zeros((len(counts), 3))
    for _ in range(ITERATIONS):
        corrected = observed * numpy.exp(slope[:, None] * minutes)
        weights = counts * robust / corrected ** 2
        coef = solve_weighted(design, corrected, weights)
        model = numpy.maximum(coef @ design.T, 1e-12)
        residual = numpy.log(model / observed)   # log X_obs - log X(N)
        if drift:
            slope = weighted_slope(minutes, residual, counts * robust)
        left = residual - slope[:, None] * minutes
        robust = soft_l1(left, scale_of(left))
    return numpy.column_stack([coef, slope])


def solve_weighted(design: numpy.ndarray, target: numpy.ndarray, weights: numpy.ndarray
           ) -> numpy.ndarray:
    """Weighted least squares per row (batched normal equations), nnls where negative or
    where the row's normal matrix is singular: a bootstrap draw of a scan over three or four
    values often holds fewer than three of them (seen on a real probe-fit sweep over 1..4)."""
    normal = numpy.einsum("bm,mi,mj->bij", weights, design, design)
    right = numpy.einsum("bm,mi,bm->bi", weights, design, target)
    full = numpy.linalg.matrix_rank(normal) == design.shape[1]
    coef = numpy.full(right.shape, -1.0)  # rank-deficient rows: through nnls below
    if full.any():
        coef[full] = numpy.linalg.solve(normal[full], right[full][..., None])[..., 0]
    for row in numpy.nonzero((coef < 0).any(axis=1))[0]:
        root = numpy.sqrt(weights[row])
        coef[row], _ = nnls(design * root[:, None], target[row] * root)
    return coef


def knee_on_grid(params: numpy.ndarray, grid: Sequence[int], threshold: float
                 ) -> tuple[numpy.ndarray, numpy.ndarray]:
    """Per parameter row: the index in ``grid`` of the smallest value within ``threshold``
    of the fitted maximum, and the fitted curve as shares of its maximum (drift removed)."""
    n = numpy.array(grid, dtype=float)
    curve = 1.0 / numpy.maximum(params[:, :3] @ numpy.vstack([1.0 / n, numpy.ones_like(n), n]),
                                1e-12)
    share = curve / curve.max(axis=1, keepdims=True)
    return numpy.argmax(share >= 1 - threshold, axis=1), share


def fit_knee(windows: Sequence[Window], grid: Sequence[int], threshold: float, *,
             seed: int = 0, bootstrap: int = BOOTSTRAP, look: int = 0) -> Knee | None:
    """The knee over ``grid`` from every window, with its bootstrap band and verdict;
    None with fewer than :data:`MIN_WINDOWS` windows or fewer than three distinct values."""
    if len(windows) < MIN_WINDOWS or len({w.value for w in windows}) < 3:
        return None
    params, again = refits(windows, seed=seed, bootstrap=bootstrap)
    index, share = knee_on_grid(params, grid, threshold)
    position = int(index[0])
    knees, shares = knee_on_grid(again, grid, threshold)
    knees = numpy.sort(numpy.asarray(grid)[knees])
    shares = numpy.sort(shares[:, position])
    share_low = float(shares[0])
    fitted = float(1.0 / max(float(usl_inverse(params[0], numpy.array([grid[position]]))[0]),
                             1e-12))
    misfit = _misfit(windows, params[0], threshold, grid[position], fitted)
    test = share_test(numpy.array([(w.value, w.metric, w.minute) for w in windows]),
                      list(grid), position, 1 - RESOLVED * threshold, params[0],
                      look_alpha(look))
    resolved = test.shown and misfit is None
    params = params[0]
    return Knee(int(grid[position]), (int(numpy.quantile(knees, 0.05, method="lower")),
                                      int(numpy.quantile(knees, 0.95, method="higher"))),
                float(share[0, position]), share_low, resolved, float(params[3]) * 10.0,
                len(windows), 0 if resolved or misfit else test.more_windows(len(windows)),
                fitted, misfit=None if misfit is None else asdict(misfit),
                evidence=(round(test.root, 3), round(test.critical, 3)),
                bound=1 - RESOLVED * threshold)


def refits(windows: Sequence[Window], *, seed: int = 0, bootstrap: int = BOOTSTRAP
           ) -> tuple[numpy.ndarray, numpy.ndarray]:
    """The point fit's parameters (one row) and the bootstrap refits' (``bootstrap`` rows,
    windows drawn with replacement): the refits behind a knee's band, the same draws for the
    same ``seed``. Drift is fitted only where a value was measured more than once (repeats
    make it visible)."""
    drift = len({w.value for w in windows}) < len(windows)
    rng = numpy.random.default_rng(seed)
    counts = rng.multinomial(len(windows), [1 / len(windows)] * len(windows), size=bootstrap)
    return fit_params(windows, drift), fit_params(windows, drift, counts.astype(float))


def _misfit(windows: Sequence[Window], params: numpy.ndarray, threshold: float,
            knee: int, fitted: float) -> Misfit | None:
    """:func:`~model_optimizer.search.core.fitcheck.knee_contradicted` with the point fit's drift
    removed from the windows."""
    logs = [math.log(max(w.metric, 1e-9)) - float(params[3]) * w.minute for w in windows]
    return knee_contradicted([w.value for w in windows], logs, knee, fitted, threshold)
