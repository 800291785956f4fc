"""The soft-L1 reweighting the fitted curve (``fit``) and its share test (``sharetest``) share:
the reweighting iterations, the scale of the residuals and the drift's robust slope."""

from __future__ import annotations

import numpy

#: reweighting iterations of one fit; the smallest soft-L1 scale (log units; the scale is
#: 1.4826 median absolute deviations of the residuals)
ITERATIONS, SCALE = 6, 0.05


def scale_of(left: numpy.ndarray) -> numpy.ndarray:
    """Per row: the soft-L1 scale of log residuals, 1.4826 MADs, at least :data:`SCALE`."""
    left = numpy.atleast_2d(left)
    return numpy.maximum(SCALE, 1.4826 * numpy.median(
        numpy.abs(left - numpy.median(left, axis=1, keepdims=True)), axis=1))


def soft_l1(left: numpy.ndarray, scale) -> numpy.ndarray:
    """The soft-L1 weights of log residuals at ``scale`` (a scalar or one per row)."""
    scale = numpy.asarray(scale, dtype=float)
    return 1.0 / numpy.sqrt(1.0 + (left / (scale[:, None] if scale.ndim else scale)) ** 2)


def weighted_slope(x: numpy.ndarray, y: numpy.ndarray, weights: numpy.ndarray
                   ) -> numpy.ndarray:
    """The weighted least-squares slope of each row of y on x (0 where x does not vary),
    bounded to +-5% per minute."""
    total = numpy.maximum(weights.sum(axis=1), 1e-12)
    mean_x = (weights * x).sum(axis=1) / total
    mean_y = (weights * y).sum(axis=1) / total
    spread = (weights * (x - mean_x[:, None]) ** 2).sum(axis=1)
    joint = (weights * (x - mean_x[:, None]) * (y - mean_y[:, None])).sum(axis=1)
    slope = numpy.where(spread > 0, joint / numpy.maximum(spread, 1e-12), 0.0)
    return numpy.clip(slope, -0.05, 0.05)
