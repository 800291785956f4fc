"""Drive the real sweep strategy against a simulated bench, one search per call.

The steps are the sweep loop's (``search/sweep/loop.py``) in the same order, calling the same pure
functions: growth and bisection by :func:`~model_optimizer.search.sweep.strategy.next_value`, the
sequential re-measurement by :func:`~model_optimizer.search.sweep.decide.remeasure_plan` (stopped
by the launch or the time budget, checked before every step by the live rule on the
simulated clock: ``search/simulate/budget.py``), the choice by
:func:`~model_optimizer.search.sweep.strategy.choose`, then a sustained confirmation launch per
candidate (the chosen value, then
:func:`~model_optimizer.search.sweep.strategy.fallback_candidates`). Only the measurement is
simulated: a probe-scan level is a window on the one scan server, a relaunch is a server of
its own. The report's warning is the loop's
(:func:`~model_optimizer.search.sweep.decide.choice_resolved`: the noise unknown or the margin not
shown within the budget, a sustained run below the search's figure, or a lowered scan ceiling that
may hide the best).

``probe-fit`` is the fitted-knee strategy (:mod:`model_optimizer.search.simulate.fitted`).
"""

from __future__ import annotations

from collections.abc import Callable

from model_optimizer.search.core.scanrules import MAX_SCAN_SERVERS, lowered_ceiling
from model_optimizer.search.simulate.bench import Bench, Noise, Outcome
from model_optimizer.search.simulate.budget import SimBudget
from model_optimizer.search.simulate.fitted import run_fitted
from model_optimizer.search.simulate.truth import Curve
from model_optimizer.search.sweep.decide import (
    PHASE_REMEASURE,
    choice_resolved,
    distinct,
    remeasure_plan,
    shortfall,
)
from model_optimizer.search.sweep.strategy import (
    Point,
    SweepConfig,
    choose,
    fallback_candidates,
    next_value,
)

STRATEGIES = ("relaunch", "probe-scan", "probe-fit")
CONFIRM_S = 60.0
THRESHOLD = 0.05
#: the sweep's default budget (``sweep.budget``), minutes of simulated clock
BUDGET_MIN = 15.0


def sweep_config(curve: Curve, *, relative_resolution: float | None = 0.0,
                 max_launches: int = 12) -> SweepConfig:
    """The sweep a user would run on this knob (``sweep`` defaults: growth 2, 5%)."""
    if curve.categorical:
        return SweepConfig("kv_cache_dtype", None, values=list(curve.values),
                           max_launches=max_launches)
    return SweepConfig("max_num_seqs", curve.low, max=curve.high, max_launches=max_launches,
                       plateau_threshold=THRESHOLD, relative_resolution=relative_resolution)


def run_search(curve: Curve, noise: Noise, seed: int, strategy: str, *,
               budget_min: float | None = BUDGET_MIN,
               relative_resolution: float | None = 0.0) -> Outcome:
    """One seeded search of ``curve`` under ``noise`` by ``strategy`` within ``budget_min``
    simulated minutes, its confirmation included (the sweep's ``sweep.budget``)."""
    bench = Bench(curve, noise, seed)
    budget = SimBudget(bench, budget_min, CONFIRM_S)
    if strategy == "probe-fit" and not curve.categorical:
        return run_fitted(bench, seed, budget)
    config = sweep_config(curve, relative_resolution=relative_resolution)
    raw: Callable[[object, str], Point] = bench.relaunch_point
    failed = None
    if strategy == "probe-scan" and not curve.categorical:
        raw, failed = scan_server(config, bench, budget)
    history: list[Point] = []

    def measure(value, phase: str) -> Point:
        return budget.take(raw, value, phase)

    def spent() -> bool:
        return budget.spent(history)

    search(config, history, measure, spent)
    if not config.categorical:
        remeasure(config, history, measure, spent)
    chosen, validated, confirmations = choose_and_confirm(config, history, bench)
    warned = not choice_resolved(config, history, None, failed, confirmations)
    return Outcome(chosen, validated, warned, bench.launches, bench.windows, bench.clock)


def scan_server(config: SweepConfig, bench: Bench,
                budget: SimBudget | None = None) -> tuple[Callable, int | None]:
    """The probe-scan server (the loop's ``_probe_scan``): launched at the ceiling, lowered
    once after a memory failure (an OOM ceiling's launches fail for memory); the measure
    function (a relaunch per value when no scan server started) and the ceiling that failed."""
    if config.max is None:
        raise ValueError("a scan server is launched at a ceiling: the config has no max")
    failed, top = None, int(config.max)
    for launched in range(1, MAX_SCAN_SERVERS + 1):
        server = (budget.launch_scan_server(top) if budget is not None
                  else bench.launch(top))
        if server.started:
            return server.window, failed
        lowered = lowered_ceiling("oom", top, int(config.start))
        if launched == MAX_SCAN_SERVERS or lowered is None:
            break
        failed, top = top, lowered
        config.max = lowered
    return bench.relaunch_point, failed


def search(config: SweepConfig, history: list[Point],
           measure: Callable[[object, str], Point],
           spent: Callable[[], bool] = lambda: False) -> None:
    """Growth and bisection until the strategy says it is finished or the budget is spent
    (the loop's ``_search``)."""
    while (decision := next_value(config, history)).value is not None and not spent():
        history.append(measure(decision.value, decision.phase))


def remeasure(config: SweepConfig, history: list[Point],
              measure: Callable[[object, str], Point],
              spent: Callable[[], bool] = lambda: False) -> None:
    """The sequential re-measurement until the margin is shown, cut short by the launch or
    the time budget (``_remeasure``)."""
    while plan := remeasure_plan(config.plateau_threshold, history):
        used = sum(point.launches for point in history)
        if (config.max_launches is not None and used >= config.max_launches) or spent():
            return
        history.append(measure(plan[0], PHASE_REMEASURE))


def choose_and_confirm(config: SweepConfig, history: list[Point],
                       bench: Bench) -> tuple[object | None, bool, list[dict]]:
    """The choice, then a sustained launch per candidate until one passes (its record with
    the loop's throughput check, :func:`~model_optimizer.search.sweep.decide.shortfall`)."""
    chosen, _ = choose(config, history)
    if chosen is None:
        return None, False, []
    for candidate in distinct([chosen, *fallback_candidates(config, history,
                                                            {chosen.value})]):
        run = bench.confirm(candidate.value, CONFIRM_S)
        if run.passed:
            return candidate.value, True, [{"ok": True, "value": candidate.value,
                                            "figures": run.figures,
                                            "shortfall": shortfall(candidate, run.figures,
                                                                   "qps")}]
    return None, False, []
