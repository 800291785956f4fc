"""The search simulator: known answers at zero noise, seeded repeatability, the judge's counts."""

import importlib.util
import math
from pathlib import Path

import pytest

from model_optimizer.search.simulate.bench import REGIMES, Bench, Noise
from model_optimizer.search.simulate.drive import CONFIRM_S, Outcome, run_search
from model_optimizer.search.simulate.table import Row, summarise
from model_optimizer.search.simulate.truth import cpu_step_time, curves, gpu_step_time
from model_optimizer.search.sweep.model import relative_grid

QUIET = REGIMES["cv0"]
WINDOW_S = QUIET.window_s + 5.0


def test_the_step_time_model_reproduces_its_calibration_figures():
    gpu = gpu_step_time()
    assert gpu.step_ms(4) == pytest.approx(30.0)                      # TPOT at 4 in flight
    assert 16 * 1000 / gpu.step_ms(16) == pytest.approx(210.0)        # output tok/s at 16
    cpu = cpu_step_time()
    # within 25% of every recorded CPU grid point (one launch each, on a loaded machine)
    for n, qps in {1: 8.41, 8: 38.97, 64: 88.77}.items():
        assert cpu.throughput(n) == pytest.approx(qps, rel=0.25)
    capped = cpu_step_time(batch_cap=20)
    assert capped.throughput(40) == capped.throughput(20) > capped.throughput(19)


def test_the_curves_know_their_answers():
    shapes = curves()
    assert shapes["monotone"].true_knee(0.05) == 48   # 1.25x-of-knee goals are against this
    assert shapes["knee-flat"].true_knee(0.05) == 18
    assert shapes["oom-ceiling"].ratio(41) == 0.0      # does not start
    assert shapes["slo-edge"].ratio(25) == 0.0         # misses the SLO
    assert shapes["categorical"].ratio("fp8") == pytest.approx(0.98)


@pytest.mark.parametrize("curve,strategy", [("monotone", "relaunch"),
                                            ("knee-flat", "relaunch"),
                                            ("slo-edge", "probe-scan")])
def test_at_zero_noise_the_sweep_finds_the_true_knee_exactly(curve, strategy):
    shape = curves()[curve]
    outcome = run_search(shape, QUIET, 0, strategy)
    assert outcome.chosen == shape.true_knee(0.05)
    assert outcome.validated and not outcome.warned
    # relaunch: every window is a launch of its own, plus the confirming launch
    assert outcome.launches == (outcome.windows + 1 if strategy == "relaunch" else 2)
    assert outcome.wall_s == outcome.launches * 30.0 + outcome.windows * WINDOW_S + CONFIRM_S


@pytest.mark.parametrize("curve", ["monotone", "monotone-gpu", "rise-fall", "slo-edge"])
def test_at_zero_noise_the_fitted_knee_is_the_true_knee_on_the_relative_grid(curve):
    shape = curves()[curve]
    outcome = run_search(shape, QUIET, 0, "probe-fit")
    knee = shape.true_knee(0.05)
    assert outcome.chosen == next(v for v in relative_grid(1, shape.high) if v >= knee)
    assert outcome.validated and not outcome.warned and outcome.launches == 2


def test_probe_scan_is_two_launches_and_lowers_its_ceiling_once_above_an_oom_ceiling():
    assert run_search(curves()["monotone"], QUIET, 0, "probe-scan").launches == 2
    oom = run_search(curves()["oom-ceiling"], QUIET, 0, "probe-scan")
    # 64 fails for memory, 32 starts and is scanned, then the confirmation: three launches;
    # 32 is within the threshold of the best seen, so the cut range 33..63 may hide a better
    # value: validated, but said to be not resolved
    assert oom.launches == 3 and oom.chosen <= 32 and oom.validated and oom.warned
    fitted = run_search(curves()["oom-ceiling"], QUIET, 0, "probe-fit")
    assert fitted.launches == 3 and fitted.chosen <= 40 and fitted.validated


def test_a_seed_repeats_exactly_and_noise_changes_the_readings():
    shape, noisy = curves()["rise-fall"], REGIMES["cv30+collapse"]
    first = run_search(shape, noisy, 7, "probe-scan")
    assert run_search(shape, noisy, 7, "probe-scan") == first
    quiet = Bench(shape, QUIET, 1).launch(64).window(16, "x")
    assert quiet.metric == shape.throughput(16)
    readings = {Bench(shape, noisy, seed).launch(64).window(16, "x").metric for seed in range(5)}
    assert len(readings) == 5


def test_collapses_read_a_fifth_to_a_half_of_the_truth():
    shape = curves()["monotone"]
    always = Noise("collapsing", 0.0, collapse=1.0)
    server = Bench(shape, always, 3).launch(64)
    shares = [server.window(8, "x").metric / shape.throughput(8) for _ in range(50)]
    assert min(shares) >= 0.2 and max(shares) <= 0.5


def test_confidently_wrong_is_a_validated_miss_without_a_warning():
    shape = curves()["monotone"]
    low = 8  # far below 0.90 of the true best
    outcomes = [Outcome(low, True, False, 2, 10, 100.0), Outcome(low, True, True, 2, 10, 100.0),
                Outcome(None, False, True, 2, 10, 100.0), Outcome(48, True, False, 2, 10, 100.0)]
    row = summarise(shape, "cv0", "x", outcomes)
    assert row.confidently_wrong == 0.25 and row.not_resolved == 0.5
    assert row.at_least_90 == 0.25 and row.within_knee == 0.75
    assert row.wrong_depth == shape.ratio(low)        # how far below 0.90 it fell
    right = summarise(shape, "cv0", "x", outcomes[1:])
    assert right.confidently_wrong == 0 and math.isnan(right.wrong_depth)


def test_the_goals_are_not_met_by_a_table_without_the_judged_strategy():
    path = Path(__file__).resolve().parents[4] / "benchmarks" / "search_sim.py"
    spec = importlib.util.spec_from_file_location("search_sim", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    row = Row("monotone", "cv5", "probe-scan", 300, 0.9, 0.96, 0.4, 0.95, 0.7, 2, 2, 18, 8.0,
              0.6, 0.01, resolved=0.97, calibration=0.02, near_knee=0.96)
    loud = Row("monotone", "cv30+collapse", "probe-scan", 300, 0.8, 0.9, 0.2, 0.7, 0.5, 2, 2,
               40, 40.0, 0.5, 0.0, resolved=0.6, calibration=0.0, near_knee=0.4)
    assert all("NOT JUDGED" in line for line in module.goals([row], [loud]))
    judged, loud_judged = (Row(**{**vars(r), "strategy": module.DEFAULT}) for r in (row, loud))
    verdicts = module.goals([judged], [loud_judged])
    assert all("MET" in line or "MISSED" in line for line in verdicts)
    assert "MISSED" in verdicts[0]                      # 2% of the resolved below 0.90
    assert all("**MET**" in line for line in verdicts[1:])
