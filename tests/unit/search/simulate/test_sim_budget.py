"""The live sweep's time budget on the simulated clock (``search/simulate/budget.py``): a
simulated sweep, its confirmation included, ends within its budget (as
``tests/unit/search/sweep/test_budget.py`` shows for the live loop on a fake clock), is not
stopped a step early, and a budget large enough changes nothing."""

import pytest

from model_optimizer.search.simulate.bench import REGIMES, Bench
from model_optimizer.search.simulate.budget import SimBudget
from model_optimizer.search.simulate.drive import CONFIRM_S, run_search
from model_optimizer.search.simulate.truth import curves
from model_optimizer.search.sweep.model import Point

NOISY = REGIMES["cv10"]
STEP_S = {"relaunch": 30.0 + 5.0 + NOISY.window_s,    # a launch, warm-up and window
          "probe-scan": 5.0 + NOISY.window_s, "probe-fit": 5.0 + NOISY.window_s}


@pytest.mark.parametrize("strategy", ["relaunch", "probe-scan", "probe-fit"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_simulated_sweep_ends_within_its_budget(strategy, seed):
    budget_min = 5.0   # far less than a search at CV 10% takes
    outcome = run_search(curves()["monotone"], NOISY, seed, strategy, budget_min=budget_min)
    # monotone has no SLO and no OOM: the first confirmation passes, so nothing falls back
    assert outcome.validated
    assert outcome.wall_s <= budget_min * 60
    # and not stopped a step early: one more step would have overrun with the confirmation
    assert outcome.wall_s + STEP_S[strategy] > budget_min * 60


@pytest.mark.parametrize("strategy", ["probe-scan", "probe-fit"])
def test_a_budget_large_enough_changes_nothing(strategy):
    shape = curves()["rise-fall"]
    unbounded = run_search(shape, NOISY, 4, strategy, budget_min=None)
    day = run_search(shape, NOISY, 4, strategy, budget_min=24 * 60)
    assert day == unbounded and unbounded.wall_s < 24 * 3600


def test_the_check_reads_the_bench_clock_the_longest_step_and_the_reserve():
    bench = Bench(curves()["monotone"], REGIMES["cv0"], 0)
    budget = SimBudget(bench, 4.0, CONFIRM_S)
    server = budget.launch_scan_server(64)
    assert budget.server_start_s == 30.0            # the confirmation's launch estimate
    history: list[Point] = []
    while not budget.spent(history):
        history.append(budget.take(server.window, 8, "x"))
    # 240 s: the 30 s start, then 20 s windows while the next one (20 s) and the reserve
    # (the 60 s run and a 30 s launch) still end by 240 s: the sixth ends at 150 s, and the
    # confirmation then ends exactly on the budget
    assert budget.step_seconds == [20.0] * 6 and bench.clock == 150.0
    assert bench.clock + CONFIRM_S + budget.server_start_s == 240.0
    assert SimBudget(bench, None, CONFIRM_S).spent(history) is False   # no budget
