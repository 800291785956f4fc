"""The cut-range rule, defined once: may the range a failure cut off hide a best that puts a
chosen value below the margin? Probe-fit's knee (``search/sweep/fitscan.py cut_knee``) and
the tune's winner (``search/tune/cutoff.py``) are both judged by it; why the percentile of
many refits and not the lowest of few: ``cut_knee``'s docstring."""

from __future__ import annotations

from collections.abc import Sequence

import numpy

from model_optimizer.search.core.fit import MIN_WINDOWS, RESOLVED, Window, refits

#: bootstrap refits, and the one-sided percentile of their shares that is judged
CUT_BOOTSTRAP, CUT_PERCENTILE = 400, 2.5


def cut_hides(value: int, windows: Sequence[Window], failed: int, threshold: float, *,
              seed: int = 0) -> bool:
    """The cut-range rule (``fitscan.cut_knee``'s, defined once; the tune judges its winner by
    it too, ``search/tune/cutoff.py``): True when the fitted curve over ``windows`` may rise
    above ``value`` by more than the margin in ``value .. failed - 1``, the range a failure
    cut off: ``value``'s fitted throughput below ``1 - RESOLVED * threshold`` of the fitted
    best there, in the point fit or at the one-sided :data:`CUT_PERCENTILE` percentile of
    :data:`CUT_BOOTSTRAP` refits. Too few windows for a fit (``fit.MIN_WINDOWS``, three
    distinct values) show nothing flat: True."""
    if len(windows) < MIN_WINDOWS or len({w.value for w in windows}) < 3:
        return True
    params, again = refits(windows, seed=seed, bootstrap=CUT_BOOTSTRAP)
    cut = numpy.arange(value, max(failed, value + 1), dtype=float)
    inverse = numpy.vstack([params, again])[:, :3] @ numpy.vstack(
        [1.0 / cut, numpy.ones_like(cut), cut])
    curve = 1.0 / numpy.maximum(inverse, 1e-12)
    share = curve[:, 0] / curve.max(axis=1)
    low = min(float(share[0]), float(numpy.percentile(share[1:], CUT_PERCENTILE)))
    return low < 1 - RESOLVED * threshold
