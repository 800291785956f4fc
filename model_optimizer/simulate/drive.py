"""Drive the real sweep strategy against a simulated bench, one search per call.

The steps are the sweep loop's (``sweep/loop.py``) in the same order, calling the same pure
functions: growth and bisection by :func:`~model_optimizer.sweep.strategy.next_value`, the
settling of the choice by :func:`~model_optimizer.sweep.settle.settled_of` (the candidate and
its challengers side by side, round after round), both stopped by the budget
(:func:`~model_optimizer.sweep.settle.over_budget` on the simulated clock), the choice by
:func:`~model_optimizer.sweep.settle.settled_choice`, then a sustained confirmation launch per
candidate (the chosen value, then :func:`~model_optimizer.sweep.strategy.fallback_candidates`).
Only the measurement is simulated: a probe-scan level is a window on the one scan server, a
relaunch is a server of its own. The verdict is the loop's
(:func:`~model_optimizer.sweep.decide.choice_resolved`).

``probe-fit`` is the fitted-knee strategy (:mod:`model_optimizer.simulate.fitted`).
"""

from __future__ import annotations

from collections.abc import Callable

from model_optimizer.search.scanrules import MAX_SCAN_SERVERS, lowered_ceiling
from model_optimizer.simulate.bench import WARMUP_S, Bench, Noise, Outcome
from model_optimizer.sweep.decide import PHASE_REMEASURE, choice_resolved, distinct, shortfall
from model_optimizer.sweep.settle import Settled, over_budget, settled_choice, settled_of
from model_optimizer.sweep.strategy import Point, SweepConfig, fallback_candidates, next_value

STRATEGIES = ("relaunch", "probe-scan", "probe-fit")
CONFIRM_S = 60.0
THRESHOLD = 0.05
#: the default budget the simulator judges (minutes): the recipe schema's ``sweep.budget``
BUDGET_MIN = 30.0


def sweep_config(curve, *, relative_resolution: float | None = None,
                 max_launches: int | None = None) -> SweepConfig:
    """The sweep a user would run on this knob (``sweep`` defaults: growth 2, 5%)."""
    if curve.categorical:
        return SweepConfig("kv_cache_dtype", None, values=list(curve.values),
                           max_launches=max_launches)
    return SweepConfig("max_num_seqs", curve.low, max=curve.high, max_launches=max_launches,
                       plateau_threshold=THRESHOLD, relative_resolution=relative_resolution)


class Clock:
    """The budget on the bench's simulated clock: the loop's rule (``over_budget``)."""

    def __init__(self, bench: Bench, budget: float, *, relaunch: bool) -> None:
        self.bench, self.budget = bench, budget
        self.window_s = bench.noise.window_s + WARMUP_S + (
            bench.noise.launch_s(bench.curve.gpu) if relaunch else 0.0)

    def spent(self) -> bool:
        """True when one more window would not leave room for the confirmation."""
        return over_budget(self.bench.clock, self.budget, CONFIRM_S, self.window_s,
                           self.bench.noise.launch_s(self.bench.curve.gpu))

    @property
    def window_minutes(self) -> float:
        """One more window, in minutes."""
        return self.window_s / 60.0


def run_search(curve, noise: Noise, seed: int, strategy: str, *,
               budget: float = BUDGET_MIN, relative_resolution: float | None = None) -> Outcome:
    """One seeded search of ``curve`` under ``noise`` by ``strategy`` within ``budget``
    minutes of simulated time."""
    from model_optimizer.simulate.fitted import run_fitted

    bench = Bench(curve, noise, seed)
    if strategy == "probe-fit" and not curve.categorical:
        return run_fitted(bench, seed, budget)
    config = sweep_config(curve, relative_resolution=relative_resolution)
    measure: Callable[[object, str], Point] = bench.relaunch_point
    failed = None
    if strategy == "probe-scan" and not curve.categorical:
        measure, failed = scan_server(config, bench)
    clock = Clock(bench, budget, relaunch=measure == bench.relaunch_point)
    history: list[Point] = []
    while True:   # the loop's _search_and_settle
        search(config, history, measure, clock)
        settled = settle_rounds(config, history, measure, clock, None)
        if clock.spent() or next_value(config, history).value is None:
            return finish(config, history, bench, settled, None, failed)


def finish(config: SweepConfig, history: list[Point], bench: Bench, settled: Settled,
           knee: dict | None, failed: int | None) -> Outcome:
    """The choice, its confirmation and the verdict (the loop's ``Finish``)."""
    chosen, validated, confirmations = choose_and_confirm(config, history, bench, settled,
                                                          knee)
    resolved = validated and choice_resolved(config, history, settled, failed, confirmations)
    return Outcome(chosen, validated, not resolved, bench.launches, bench.windows, bench.clock)


def scan_server(config: SweepConfig, bench: Bench) -> tuple[Callable, int | None]:
    """The probe-scan server (the loop's ``_probe_scan``): launched at the ceiling, lowered
    once after a memory failure (an OOM ceiling's launches fail for memory); the measure
    function (a relaunch per value when no scan server started) and the ceiling that failed."""
    failed = None
    for launched in range(1, MAX_SCAN_SERVERS + 1):
        server = bench.launch(int(config.max))
        if server.started:
            return server.window, failed
        lowered = lowered_ceiling("oom", int(config.max), int(config.start))
        if launched == MAX_SCAN_SERVERS or lowered is None:
            break
        failed, config.max = int(config.max), lowered
    return bench.relaunch_point, failed


def search(config: SweepConfig, history: list[Point],
           measure: Callable[[object, str], Point], clock: Clock) -> None:
    """Growth and bisection until the strategy says it is finished or the budget is spent
    (the loop's ``_search``)."""
    while (decision := next_value(config, history)).value is not None and not clock.spent():
        history.append(measure(decision.value, decision.phase))


def settle_rounds(config: SweepConfig, history: list[Point],
                  measure: Callable[[object, str], Point], clock: Clock,
                  knee: dict | None) -> Settled:
    """The settling, stopped by the budget (the loop's ``_settle``)."""
    memo: dict = {}
    while (settled := settled_of(config, history, knee, clock.window_minutes, memo)).plan:
        if clock.spent():
            return settled
        history.append(measure(settled.plan[0], PHASE_REMEASURE))
    return settled


def choose_and_confirm(config: SweepConfig, history: list[Point], bench: Bench,
                       settled: Settled, knee: dict | None = None,
                       ) -> tuple[object | None, bool, list[dict]]:
    """The choice, then a sustained launch per candidate until one passes (its record with
    the loop's throughput check, :func:`~model_optimizer.sweep.decide.shortfall`)."""
    chosen, _ = settled_choice(config, history, knee, settled)
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
