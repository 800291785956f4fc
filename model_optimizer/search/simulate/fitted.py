"""The fitted-knee strategy on the simulated bench (``probe-fit``).

One scan server at the ceiling (halved and relaunched while a launch fails, as an OOM
ceiling does: ``search.scanrules.lower_ceiling``, the rule the tune and the real sweep
lower their ceiling by), the levels of
:func:`model_optimizer.search.sweep.fitscan.next_step`, the knee from the fit over every window,
then one sustained launch to confirm it (falling back down the fine grid when it fails).
When the ceiling had to be lowered, the fit extrapolated to the ceiling that failed decides
whether the cut range could hide the best (then: not resolved; ``sweep.fitscan.cut_knee``).
Categorical knobs are relaunched as the sweep does.
"""

from __future__ import annotations

from model_optimizer.search.core.scanrules import lower_ceiling
from model_optimizer.search.simulate.bench import Bench, Outcome
from model_optimizer.search.simulate.budget import SimBudget
from model_optimizer.search.sweep.decide import shortfall
from model_optimizer.search.sweep.fitscan import (
    NARROW_ROUNDS,
    cut_knee,
    fitted_choice,
    knee_so_far,
    next_step,
    windows_of,
)
from model_optimizer.search.sweep.model import relative_grid

THRESHOLD, CONFIRM_S, MAX_SERVER_LAUNCHES = 0.05, 60.0, 3


def run_fitted(bench: Bench, seed: int, budget: SimBudget | None = None):
    """One probe-fit search of a numeric curve (a categorical knob is relaunched by
    ``simulate.drive``), no window started that the time left cannot hold with the
    confirmation (``budget``: the live rule on the simulated clock, ``search/simulate/budget.py``;
    None: no budget), the knee then fitted on what was measured."""
    curve = bench.curve
    budget = budget or SimBudget(bench, None, CONFIRM_S)
    ceiling, server = curve.high, None
    for _ in range(MAX_SERVER_LAUNCHES - 1):
        server = budget.launch_scan_server(ceiling)
        if server.started:
            break
        ceiling = lower_ceiling(ceiling, None, curve.low)
    if server is None or not server.started:
        return Outcome(None, False, True, bench.launches, bench.windows, bench.clock)
    minutes = (bench.noise.window_s + 5.0) / 60.0
    history = []
    while (step := next_step(history, curve.low, ceiling, THRESHOLD, rounds=NARROW_ROUNDS,
                             window_minutes=minutes, seed=seed,
                             steps_left=budget.steps_left(history))).value is not None:
        if budget.spent(history):
            break
        assert step.phase is not None  # a step with a value always names its phase
        history.append(budget.take(server.window, step.value, step.phase))
    knee = step.knee if step.value is None else knee_so_far(
        history, curve.low, ceiling, THRESHOLD, window_minutes=minutes, seed=seed,
        look=step.look)
    if knee is None:
        return Outcome(None, False, True, bench.launches, bench.windows, bench.clock)
    failed = ceiling * 2 if ceiling < curve.high else None
    knee = cut_knee(knee, windows_of(history, minutes), failed, THRESHOLD, seed=seed)
    warned = not knee.resolved
    chosen = fitted_choice(knee.to_dict(), history)[0]
    for value in reversed([v for v in relative_grid(curve.low, knee.value)][-3:]):
        run = bench.confirm(value, CONFIRM_S)
        if run.passed:   # the loop's throughput check on the knee's own run
            short = value == chosen.value and shortfall(chosen, run.figures, "qps")
            return Outcome(value, True, warned or bool(short), bench.launches, bench.windows,
                           bench.clock)
    return Outcome(None, False, warned, bench.launches, bench.windows, bench.clock)

