"""The fitted-knee strategy on the simulated bench (``probe-fit``).

One scan server at the ceiling (halved and relaunched while a launch fails, as an OOM
ceiling does: ``search.scanrules.lower_ceiling``, the rule the tune lowers its ceiling by;
the real sweep's probe-fit does not lower it, it relaunches per value), the levels of
:func:`model_optimizer.sweep.fitscan.next_step`, the knee from the fit over every window,
then one sustained launch to confirm it (falling back down the fine grid when it fails).
When the ceiling had to be lowered, the fit extrapolated to the ceiling that failed decides
whether the cut range could hide the best (then: not resolved).
Categorical knobs are relaunched as the sweep does.
"""

from __future__ import annotations

import numpy

from model_optimizer.search.scanrules import lower_ceiling
from model_optimizer.simulate.bench import Bench, Outcome
from model_optimizer.sweep.fit import RESOLVED, fit_params, usl_inverse
from model_optimizer.sweep.fitscan import next_step, windows_of
from model_optimizer.sweep.model import relative_grid

THRESHOLD, CONFIRM_S, MAX_SERVER_LAUNCHES = 0.05, 60.0, 3


def run_fitted(bench: Bench, seed: int):
    """One probe-fit search of a numeric curve (a categorical knob is relaunched by
    ``simulate.drive``)."""
    curve = bench.curve
    ceiling, server = curve.high, None
    for _ in range(MAX_SERVER_LAUNCHES - 1):
        server = bench.launch(ceiling)
        if server.started:
            break
        ceiling = lower_ceiling(ceiling, None, curve.low)
    if server is None or not server.started:
        return Outcome(None, False, True, bench.launches, bench.windows, bench.clock)
    minutes = (bench.noise.window_s + 5.0) / 60.0
    history = []
    while (step := next_step(history, curve.low, ceiling, THRESHOLD,
                             window_minutes=minutes, seed=seed)).value is not None:
        history.append(server.window(step.value, step.phase))
    knee = step.knee
    if knee is None:
        return Outcome(None, False, True, bench.launches, bench.windows, bench.clock)
    warned = not knee.resolved or (ceiling < curve.high and _beyond_reach(
        windows_of(history, minutes), knee.fitted, ceiling * 2))
    for value in reversed([v for v in relative_grid(curve.low, knee.value)][-3:]):
        if bench.confirm(value, CONFIRM_S):
            return Outcome(value, True, warned, bench.launches, bench.windows, bench.clock)
    return Outcome(None, False, warned, bench.launches, bench.windows, bench.clock)


def _beyond_reach(windows, fitted: float, failed: int) -> bool:
    """True when the fitted curve, extrapolated to the ceiling that failed to launch, could
    hold a best that puts the knee below ``1 - 1.5 * threshold`` of it: the range cut by
    the failed launch may hide the true best, so the choice is not resolved."""
    params = fit_params(windows)[0]
    reach = 1.0 / max(float(usl_inverse(params, numpy.array([float(failed)]))[0]), 1e-12)
    return fitted < (1 - RESOLVED * THRESHOLD) * reach
