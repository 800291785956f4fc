"""The sweep's time budget on a fake clock (``search/sweep/budget.py``): no step starts that the
time left cannot hold with the confirmation, so a sweep ends within its budget plus what its last
step takes beyond the longest one measured before it (here: nothing, every later step being no
longer); the stop reason says ``budget``; a budget large enough changes nothing."""

import json

import pytest

from model_optimizer.recipe import load_recipe
from model_optimizer.runner import RunOutcome
from model_optimizer.search.core import session as session_module
from model_optimizer.search.sweep import choice as choice_module
from model_optimizer.search.sweep.budget import BudgetCheck, budget_check
from model_optimizer.search.sweep.flags import SweepFlags
from model_optimizer.search.sweep.loop import start_sweep
from model_optimizer.search.sweep.model import Point
from tests.unit.search.sweep.test_loop import FakeMeasure, recipe  # noqa: F401 - the fixture

#: seconds each measured step takes, in turn (warm-up and window; a launch when relaunching):
#: the longest (36) comes second, so every later step fits the estimate
STEP_SECONDS = (30.0, 36.0, 27.0, 33.0)
LAUNCH_S, CONFIRM_S = 10.0, 20.0   # the fake confirmation: a launch, then its sustained run


@pytest.fixture
def clock(monkeypatch):
    """The search session's monotonic clock, moved only by the fakes below."""
    now = [1000.0]
    monkeypatch.setattr(session_module.time, "monotonic", lambda: now[0])
    return now


class ClockedMeasure(FakeMeasure):
    """:class:`FakeMeasure`, each step taking the next of :data:`STEP_SECONDS`."""

    def __init__(self, now):
        super().__init__()
        self.now = now

    def __call__(self, step, value):
        self.now[0] += STEP_SECONDS[len(self.calls) % len(STEP_SECONDS)]
        return super().__call__(step, value)


def fake_confirmation(now, tmp_path):
    """A sustained run that takes LAUNCH_S + CONFIRM_S on the fake clock and holds up."""
    def run(step, steps_dir, **kwargs):
        assert kwargs["workload_override"]["duration_s"] == CONFIRM_S
        now[0] += LAUNCH_S + CONFIRM_S
        return RunOutcome("ok", tmp_path, "confirm-run", metrics={
            "qps": 23.0, "goodput_qps": 23.0, "completed": 400, "failed": 0, "slo_met": True})
    return run


def clocked_sweep(recipe, tmp_path, now, strategy, budget, sets=()):  # noqa: F811
    measure = ClockedMeasure(now)
    loaded = load_recipe(recipe, ["workload.concurrency=null", "sweep.max=64",
                                  "sweep.max_launches=null", *sets])
    outcome = start_sweep(loaded, tmp_path / "runs", output=tmp_path / "out.yaml",
                          measure=measure,
                          flags=SweepFlags(start=1, strategy=strategy, budget=budget))
    state = json.loads((outcome.archive / "state.json").read_text())
    summary = json.loads((outcome.archive / "summary.json").read_text())
    return outcome, measure, state, summary


def test_the_check_counts_the_longest_step_and_the_confirmation():
    history = [Point(1, "up", "ok", [1.0], launches=1), Point(2, "up", "ok", [2.0], launches=2)]
    # relaunched: the longest step 80 s; a launch is its step per launch less its window
    check = budget_check(3, 55.0, history, [50.0, 80.0], window_s=20, confirm_s=15)
    assert check == BudgetCheck(3.0, 55.0, 80.0, 15 + 30.0)  # max(50 - 20, 80 / 2 - 20)
    assert check.fits and check.ends_at_s == 180.0   # ends on the budget: still fits
    assert not budget_check(3, 55.1, history, [50.0, 80.0], window_s=20, confirm_s=15).fits
    # on a scan server: its measured start is the confirmation's launch
    scan = [Point(1, "scan-up", "ok", [1.0]), Point(2, "scan-up", "ok", [2.0])]
    check = budget_check(1, 0.0, scan, [25.0, 22.0], window_s=20, confirm_s=15,
                         server_start_s=12.0)
    assert (check.step_s, check.reserve_s) == (25.0, 27.0)
    # before any step: the window as configured; no confirmation run: no reserve
    assert budget_check(1, 0.0, [], [], window_s=20, confirm_s=0) == BudgetCheck(
        1.0, 0.0, 20.0, 0.0)
    assert budget_check(None, 1e9, [], [], window_s=20, confirm_s=15) is None
    assert "time budget of 3 min spent: 2.0 min used, and the next step (about 80 s) and " \
           "the confirmation (about 45 s) would end at 4.1 min" in budget_check(
               3, 120.0, history, [50.0, 80.0], window_s=20, confirm_s=15).words()


def test_a_probe_fit_scan_stops_before_the_window_the_budget_cannot_hold(
        recipe, tmp_path, clock, monkeypatch):  # noqa: F811
    monkeypatch.setattr(choice_module, "run_recipe", fake_confirmation(clock, tmp_path))
    budget = 5   # minutes: about ten windows of a scan that needs far more
    outcome, measure, state, summary = clocked_sweep(
        recipe, tmp_path, clock, "probe-fit", budget, [f"sweep.confirm_duration_s={CONFIRM_S}"])
    assert outcome.written is not None and summary["confirmations"][0]["ok"]
    # the whole sweep, the confirmation included, within its budget (tolerance 0 here: no
    # step ran longer than the longest one before it, and the confirmation took its reserve)
    assert state["elapsed_s"] <= budget * 60
    # and not stopped early: one more window and the confirmation would not have fitted
    longest = max(STEP_SECONDS)
    reserve = CONFIRM_S + (longest - 20)   # injected steps count as launches: 20 s windows
    assert state["elapsed_s"] - LAUNCH_S - CONFIRM_S + longest + reserve > budget * 60
    assert state["step_seconds"] == [STEP_SECONDS[i % 4] for i in range(len(measure.calls))]
    # the stop says the budget ended the scan, and the knee is fitted on what was measured
    assert summary["stop"]["stop_rule"] == "budget"
    assert f"time budget of {budget} min spent" in summary["stop"]["reason"]
    assert state["knee"]["budget_spent"] is True
    assert state["knee"]["windows"] == len(measure.calls)
    ended = f"the time budget ended the scan at {len(measure.calls)} windows"
    assert ended in summary["stop"]["reason"] and ended in outcome.reason
    report = (outcome.archive / "report.md").read_text()
    assert "**Search stopped** (budget)" in report and ended in report


def test_a_relaunch_sweep_starts_no_launch_the_budget_cannot_hold(
        recipe, tmp_path, clock):  # noqa: F811
    budget = 2.5   # minutes: five launches of 30-36 s
    outcome, measure, state, summary = clocked_sweep(
        recipe, tmp_path, clock, "relaunch", budget, ["sweep.confirm_duration_s=0"])
    assert state["elapsed_s"] <= budget * 60
    assert state["elapsed_s"] + max(STEP_SECONDS) > budget * 60   # one more would not fit
    stops = [d for d in state["decisions"] if d["value"] is None]
    assert stops[-1]["stop_rule"] == "budget"
    assert "next would have been" in stops[-1]["reason"] or \
        "re-measurement stopped by the budget" in stops[-1]["reason"]
    assert "NOT RESOLVED" in outcome.reason   # the margin not shown: what would show it


@pytest.mark.parametrize("strategy", ["probe-fit", "probe-scan"])
def test_a_budget_large_enough_changes_nothing(recipe, tmp_path, clock, strategy):  # noqa: F811
    sets = ["sweep.confirm_duration_s=0"]
    unbounded = clocked_sweep(recipe, tmp_path / "none", clock, strategy, None, sets)
    # a day: far more than the sweep takes (under an hour of fake steps)
    bounded = clocked_sweep(recipe, tmp_path / "day", clock, strategy, 24 * 60, sets)
    assert bounded[2]["elapsed_s"] < 3600
    assert bounded[1].calls == unbounded[1].calls
    assert [(s["value"], s["phase"]) for s in bounded[3]["steps"]] == \
        [(s["value"], s["phase"]) for s in unbounded[3]["steps"]]
    assert bounded[0].chosen.value == unbounded[0].chosen.value
    assert bounded[2]["knee"] == unbounded[2]["knee"]
    stops = [{k: v for k, v in found[3]["stop"].items() if k != "at"}
             for found in (bounded, unbounded)]
    assert stops[0] == stops[1] and stops[0]["stop_rule"] != "budget"
