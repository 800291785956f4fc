"""Is the fitted knee's share of the best shown? A robust likelihood-ratio test, not a bootstrap.

The knee is resolved when the windows rule out every curve of the fitted family (the USL with
its drift, :mod:`model_optimizer.search.core.fit`) that puts the chosen value below
``1 - RESOLVED * plateau_threshold`` of that curve's best over the measured range. The test
fits the windows once more under that constraint (the curve's value at some grid level ``m``
is ``1 / bound`` times its value at the knee: for each ``m``, the equality-constrained
weighted least squares of the fit's linear form, reweighted with the same soft-L1 loss at the
point fit's scale, the drift refitted) and compares the two fits' robust deviances: the
drop-in-dispersion test of an M-estimator (Ronchetti 1982; Heritier and Ronchetti 1994),
``2 * (rho_constrained - rho_free) * mean(psi') / mean(psi^2)``, chi-square with one degree
of freedom under the constraint. Its signed root is compared with Student's t at
:data:`ALPHA` one-sided on the windows' residual degrees of freedom.

Why not the bootstrap of the share at the chosen value (the rule until 2026-12-07): the
share's spread is a function of the curve, and it is narrowest where the fit is flattest. At
CV 30% with collapses a scan whose low levels read high looks flat; the point fit then
saturates early, every refit agrees that the chosen value is near the flat top, and the
lowest of 40 refits read 0.927-0.933 where the truth was 0.77 (the simulator's monotone
curve, seeds 14, 40, 148, 278; a fresh-noise resample of the same design spread 5 times
wider than the bootstrap). The truth fell below the 2.5th percentile of 400 refits in 17% of
150 repetitions. The test asks the windows directly how badly the best curve with a low share
fits them, which does not depend on how flat the point fit happens to be.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy
from scipy.optimize import nnls

from model_optimizer.search.core.robust import ITERATIONS, scale_of, soft_l1, weighted_slope

#: one-sided level: the lowest of the old rule's 40 refits stood for about 1/41
ALPHA = 0.025


@dataclass(frozen=True)
class ShareTest:
    """The signed root of the test statistic and the critical value it must reach."""

    root: float
    critical: float

    @property
    def shown(self) -> bool:
        """The windows rule out a share below the bound at :data:`ALPHA`."""
        return self.root >= self.critical

    def more_windows(self, count: int) -> int:
        """Windows that would reach the critical value, the root growing as sqrt(n)."""
        if self.shown:
            return 0
        ratio = self.critical / max(self.root, 0.25)
        return max(2, math.ceil(count * (ratio * ratio - 1)))


def look_alpha(look: int) -> float:
    """The one-sided level of the test at ``look`` (0: the first verdict, after the down
    pass; k: after the k-th narrowing round): :data:`ALPHA` / (k + 1). A scan that narrows
    tests its knee again after every round, and each test is a chance to resolve wrongly:
    the simulator's monotone-gpu curve at CV 30% and 3x the budget resolved 6 of 167 knees
    below 0.90 of the truth, 5 of them after 1-8 rounds (3.6%; with this level 0.8%). The
    looks share most of their windows, so their errors are far from independent, and the
    harmonic sum of the levels overstates what they spend together; ALPHA / (1 + log2(k+1))
    cost about the same (the first halving is most of the price)."""
    return ALPHA / (look + 1)


def share_test(windows: numpy.ndarray, grid: list[int], position: int, bound: float,
               point: numpy.ndarray, alpha: float = ALPHA) -> ShareTest:
    """The test of the module docstring at one-sided ``alpha``: may ``grid[position]`` be
    below ``bound`` of the best over ``grid``? ``windows``: rows of (value, reading,
    minute); ``point``: the point fit's parameters (a, b, c, drift per minute;
    ``fit.fit_params``)."""
    data = _Data(windows)
    left = data.residuals(point[:3], float(point[3]))
    scale = float(scale_of(left)[0])
    u = left / scale
    free = float(numpy.sum(numpy.sqrt(1.0 + u * u) - 1.0))
    dof = max(1, len(data.n) - (4 if data.drift else 3))
    # mean(psi') / mean(psi^2), the latter over the residual degrees of freedom (as the
    # F test's RSS / (n - p)): the free fit's residuals are smaller than the noise
    efficiency = float(numpy.mean((1.0 + u * u) ** -1.5)) / max(
        float(numpy.sum(u * u / (1 + u * u))) / dof, 1e-12)
    knee = float(grid[position])
    others = numpy.array([g for g in grid if g != grid[position]], dtype=float)
    if not len(others):
        return ShareTest(math.inf, 0.0)   # one level: it is the best
    rows = numpy.column_stack([1.0 / others, numpy.ones_like(others), others]) - bound * \
        numpy.array([1.0 / knee, 1.0, knee])
    constrained = data.constrained_deviance(rows, scale, float(point[3]))
    statistic = max(0.0, 2.0 * (constrained - free) * efficiency)
    return ShareTest(math.sqrt(statistic), _t_quantile(dof, alpha))


def _t_quantile(dof: int, alpha: float) -> float:
    from scipy.stats import t as student  # (0.9 s to import: only once a knee is judged)
    return float(student.ppf(1.0 - alpha, dof))


class _Data:
    """The windows in the fit's linear form."""

    def __init__(self, windows: numpy.ndarray) -> None:
        self.n, readings, self.minutes = (numpy.asarray(windows, dtype=float)).T
        self.observed = 1.0 / numpy.maximum(readings, 1e-9)
        self.design = numpy.column_stack([1.0 / self.n, numpy.ones_like(self.n), self.n])
        self.drift = len(set(self.n.tolist())) < len(self.n)

    def residuals(self, coef: numpy.ndarray, slope) -> numpy.ndarray:
        """Log residuals (model over reading) less the drift, per row of ``coef``."""
        model = numpy.maximum(numpy.atleast_2d(coef) @ self.design.T, 1e-12)
        slope = numpy.atleast_1d(slope)
        left = numpy.log(model / self.observed) - slope[:, None] * self.minutes
        return left[0] if numpy.ndim(coef) == 1 else left

    def constrained_deviance(self, rows: numpy.ndarray, scale: float, slope0: float) -> float:
        """The lowest soft-L1 deviance over the constraints ``rows @ coef = 0`` (one a
        candidate level of the best), each fitted by reweighted least squares."""
        count = len(rows)
        slope = numpy.full(count, slope0)
        robust = numpy.ones((count, len(self.n)))
        left = numpy.zeros_like(robust)
        for _ in range(ITERATIONS):
            corrected = self.observed * numpy.exp(slope[:, None] * self.minutes)
            coef = self._solve(corrected, robust / corrected ** 2, rows)
            left = self.residuals(coef, numpy.zeros(count))
            if self.drift:
                slope = weighted_slope(self.minutes, left, robust)
            left = left - slope[:, None] * self.minutes
            robust = soft_l1(left, scale)
        return float(numpy.min(numpy.sum(numpy.sqrt(1.0 + (left / scale) ** 2) - 1.0, axis=1)))

    def _solve(self, target: numpy.ndarray, weights: numpy.ndarray, rows: numpy.ndarray
               ) -> numpy.ndarray:
        """Weighted least squares per row under ``rows[b] @ coef = 0`` (the KKT system),
        non-negative through nnls with the constraint as a heavy row where it goes negative."""
        normal = numpy.einsum("bm,mi,mj->bij", weights, self.design, self.design)
        right = numpy.einsum("bm,mi,bm->bi", weights, self.design, target)
        count = len(rows)
        system = numpy.zeros((count, 4, 4))
        system[:, :3, :3], system[:, :3, 3], system[:, 3, :3] = normal, rows, rows
        extended = numpy.concatenate([right, numpy.zeros((count, 1))], axis=1)
        coef = numpy.full((count, 3), -1.0)
        solvable = numpy.linalg.matrix_rank(system) == 4
        if solvable.any():
            coef[solvable] = numpy.linalg.solve(system[solvable],
                                                extended[solvable][..., None])[:, :3, 0]
        for row in numpy.nonzero((coef < 0).any(axis=1))[0]:
            root = numpy.sqrt(weights[row])
            heavy = 1e4 * math.sqrt(weights[row].sum()) / numpy.abs(rows[row]).max()
            coef[row], _ = nnls(numpy.vstack([self.design * root[:, None], heavy * rows[row]]),
                                numpy.append(target[row] * root, 0.0))
        return coef
