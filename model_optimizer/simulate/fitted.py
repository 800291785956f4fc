"""The fitted-knee strategy on the simulated bench (``probe-fit``).

One scan server at the ceiling (halved and relaunched once when its launch fails, as an OOM
ceiling does: ``search.scanrules.lower_ceiling``, the rule the tune and the real sweep lower
their ceiling by), the levels of :func:`model_optimizer.sweep.fitscan.next_step` (up, then
down), the knee from the fit over every window (``sweep.fitscan.cut_knee`` when the ceiling
was lowered), then the settling, the choice and its confirmation as for every strategy
(:func:`model_optimizer.simulate.drive.settle_rounds`, :func:`~.drive.finish`), all within
the budget. Categorical knobs are relaunched as the sweep does.
"""

from __future__ import annotations

from model_optimizer.search.scanrules import MAX_SCAN_SERVERS, lower_ceiling
from model_optimizer.simulate.bench import WARMUP_S, Bench, Outcome
from model_optimizer.simulate.drive import THRESHOLD, Clock, finish, settle_rounds, sweep_config
from model_optimizer.sweep.fitscan import cut_knee, next_step, windows_of


def run_fitted(bench: Bench, seed: int, budget: float) -> Outcome:
    """One probe-fit search of a numeric curve within ``budget`` minutes."""
    curve = bench.curve
    ceiling, server, failed = curve.high, None, None
    for _ in range(MAX_SCAN_SERVERS):
        server = bench.launch(ceiling)
        if server.started:
            break
        failed, ceiling = ceiling, lower_ceiling(ceiling, None, curve.low)
    if server is None or not server.started:
        return Outcome(None, False, True, bench.launches, bench.windows, bench.clock)
    config = sweep_config(curve)
    config.max = ceiling
    clock = Clock(bench, budget, relaunch=False)
    minutes = (bench.noise.window_s + WARMUP_S) / 60.0
    history = []
    while (step := next_step(history, curve.low, ceiling, THRESHOLD, rounds=0,
                             window_minutes=minutes, seed=seed)).value is not None:
        if clock.spent():
            break
        history.append(server.window(step.value, step.phase))
    knee = None
    if step.value is None and step.knee is not None:
        knee = cut_knee(step.knee, windows_of(history, minutes), failed, THRESHOLD).to_dict()
    settled = settle_rounds(config, history, server.window, clock, knee)
    return finish(config, history, bench, settled, knee, failed)
