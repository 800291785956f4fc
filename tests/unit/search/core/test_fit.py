"""Knees from a fitted curve, on recorded real series (benchmarks/README.md) and known curves."""

import pytest

from model_optimizer.search.core.fit import Window, fit_knee, fit_params, knee_on_grid
from model_optimizer.search.sweep.fitscan import PHASE_DOWN, PHASE_UP, coarse_levels, next_step
from model_optimizer.search.sweep.model import Point, relative_grid

#: issue 11 run 4, probe-scan windows in order (g, b, r); r60 56.9 is a collapse
RUN4 = [(1, 7.3), (2, 11.8), (4, 20.0), (8, 34.9), (16, 47.6), (32, 69.9), (64, 96.0),
        (48, 86.3), (56, 88.0), (60, 92.0), (60, 100.8), (64, 100.9), (60, 56.9), (64, 96.5)]
#: issue 20: the new user's workload, grid medians at 1..64 (a knee inside the range)
INTERIOR = [(1, 10.0), (2, 16.4), (4, 22.3), (8, 32.8), (16, 42.3), (32, 54.8), (64, 50.1)]
#: issue 11 run 5, probe-scan windows (noise CV 36.5%)
RUN5 = [(1, 11.00), (2, 11.40), (4, 13.04), (8, 17.95), (16, 19.15), (32, 16.08),
        (64, 34.84), (12, 32.89), (8, 16.72), (12, 14.39), (8, 16.10), (12, 14.66)]
#: a real probe-fit sweep over 1..4 (2026-12-02, up, down, narrow): bootstrap draws of it
#: often hold fewer than three distinct values, which once made the fit's solve raise
SMALL_SCAN = [(1, 3.95), (2, 3.98), (3, 4.75), (4, 4.25), (4, 7.13), (3, 4.78), (2, 3.11),
              (1, 3.93), (1, 4.91), (2, 3.74), (3, 8.22), (4, 6.78)]
GRID = relative_grid(1, 64)


def windows(series, minutes=1 / 3):
    return [Window(value, metric, index * minutes) for index, (value, metric)
            in enumerate(series)]


def usl(n, lam=8.0, sigma=0.02, kappa=0.0006):
    return lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


def test_an_exact_usl_curve_gives_the_brute_force_knee():
    levels = coarse_levels(1, 64)
    knee = fit_knee(windows([(n, usl(n)) for n in levels]), GRID, 0.05)
    best = max(usl(n) for n in GRID)
    assert knee.value == next(n for n in GRID if usl(n) >= 0.95 * best)
    assert knee.resolved and knee.band == (knee.value, knee.value)


def test_the_recorded_run_4_chooses_near_the_top_and_the_collapse_barely_moves_it():
    with_collapse = fit_knee(windows(RUN4), GRID, 0.05)
    without = fit_knee(windows([w for w in RUN4 if w != (60, 56.9)]), GRID, 0.05)
    assert with_collapse.value >= 44          # the curve still rises at 64
    assert abs(with_collapse.value - without.value) <= 0.125 * without.value


def test_an_interior_knee_is_found_inside_the_range_not_at_its_top():
    knee = fit_knee(windows(INTERIOR), GRID, 0.05)
    # the grid read its best at 32 and 50.1 at 64; the sweep of issue 20 chose 57
    assert 16 <= knee.value <= 40


def test_a_noisy_recorded_series_is_not_resolved_and_says_what_would_resolve_it():
    knee = fit_knee(windows(RUN5), GRID, 0.05)
    assert not knee.resolved and knee.more_windows > 0
    assert knee.verdict().startswith("not resolved at this noise")
    assert knee.to_dict()["resolved"] is False


def test_drift_over_the_servers_life_is_modelled_not_read_as_the_knob():
    levels = coarse_levels(1, 64)
    order = levels + levels[::-1]             # up, then down
    quiet = fit_knee(windows([(n, usl(n)) for n in order]), GRID, 0.05)
    drifting = [(n, usl(n) * (1 + 0.02 * i)) for i, n in enumerate(order)]  # +6%/min
    fitted = fit_knee(windows(drifting), GRID, 0.05)
    assert abs(fitted.value - quiet.value) <= 0.125 * quiet.value
    assert fitted.drift_per_10min > 0.3


def test_the_scan_goes_up_then_down_then_finishes_with_the_knee():
    history = []
    while (step := next_step(history, 1, 64, 0.05)).value is not None:
        history.append(Point(step.value, step.phase, "ok", [usl(step.value)], slo_met=True))
    levels = coarse_levels(1, 64)
    assert [p.value for p in history if p.phase == PHASE_UP] == levels
    assert [p.value for p in history if p.phase == PHASE_DOWN] == levels[::-1]
    assert step.knee.resolved and step.knee.value == fit_knee(
        windows([(n, usl(n)) for n in levels]), GRID, 0.05).value


def test_an_slo_ceiling_is_bisected_and_bounds_the_knee():
    history = []
    while (step := next_step(history, 1, 64, 0.05)).value is not None:
        history.append(Point(step.value, step.phase, "ok", [usl(step.value)],
                             slo_met=step.value <= 20))
    assert step.knee.value <= 20
    assert {18, 20} & {p.value for p in history if p.phase == "ceiling"}


@pytest.mark.parametrize("low,high", [(1, 64), (1, 256), (100, 140)])
def test_the_relative_grid_never_steps_more_than_an_eighth(low, high):
    grid = relative_grid(low, high)
    assert grid[0] == low and grid[-1] == high
    for a, b in zip(grid, grid[1:], strict=False):
        assert b - a <= max(1, 0.125 * b)
    assert 121 not in relative_grid(100, 140)   # 120 against 121 is never a question


def test_a_small_scan_whose_draws_miss_values_still_gives_a_knee_and_band():
    grid = relative_grid(1, 4)
    for count in range(4, len(SMALL_SCAN) + 1):
        for seed in range(5):
            knee = fit_knee(windows(SMALL_SCAN[:count]), grid, 0.05, seed=seed)
            assert knee is not None and 1 <= knee.value <= 4, (count, seed)
            assert 1 <= knee.band[0] <= knee.band[1] <= 4, (count, seed, knee.band)


#: the simulator's recorded calibration miss (``monotone-gpu`` at CV 10%, seed 51: the 15-min
#: budget ended the down pass at 24, 20 s a window): the windows at 12 and 16 read 2.0 and
#: 1.9 req/s, about 30% above their truth, and the knee came out at 22, 0.866 of the true
#: best (the true knee is 56), resolved at 0.930
GPU_CV10_SEED51 = [
    (1, 0.4739), (2, 0.6524), (3, 0.8267), (4, 1.2089), (6, 1.0871), (8, 1.2376),
    (12, 1.976), (16, 1.9058), (24, 1.6955), (32, 2.0021), (48, 1.7475), (64, 1.7671),
    (96, 1.5347), (128, 1.8107), (192, 1.7516), (256, 1.7774), (256, 1.6627),
    (192, 1.6443), (128, 1.7023), (96, 2.4658), (64, 1.8711), (48, 1.9045), (32, 2.2416),
    (24, 1.9536)]


def test_the_gpu_miss_at_cv10_is_the_windows_not_the_drift():
    """Issue 35's once-open miss, pinned: the fitted drift (+24% per 10 min against the
    server's -3%) moves the knee one grid step (22 against 24 without it), both below 0.90
    of the truth; the bootstrap's lowest share stayed above 0.925 (0.930: resolved by the rule
    before 2026-12-07's third run), the share test does not rule out a curve that puts 22
    below 0.925 of its best (``search/core/sharetest.py``)."""
    windows = [Window(n, qps, minute=i / 3) for i, (n, qps) in enumerate(GPU_CV10_SEED51)]
    grid = relative_grid(1, 256)
    knee = fit_knee(windows, grid, 0.05, seed=51)
    assert knee.value == 22 and knee.drift_per_10min > 0.2
    assert knee.share_low > 0.925 and not knee.resolved
    assert knee.evidence[0] < knee.evidence[1]
    still = fit_params(windows, drift=False)
    index, _ = knee_on_grid(still, grid, 0.05)
    truth = [n / (14.6 + 3.85 * n) for n in (grid[int(index[0])], 256)]
    assert grid[int(index[0])] == 24 and truth[0] / truth[1] < 0.90


#: the simulator's monotone CPU curve at CV 30% with collapses, seed 148 (15-min budget: up,
#: down, one narrowing round; 20 s a window): the low levels read high and the top low, so
#: the fit saturates early and puts the knee at 22 (0.770 of the true best; the true knee is
#: 48); every one of 40 refits agreed (lowest share 0.927), as refits of a flat-looking fit do
CPU_CV30_SEED148 = [
    (1, 3.265), (2, 11.499), (3, 16.728), (4, 14.216), (6, 9.851), (8, 31.61), (12, 37.578),
    (16, 46.35), (24, 64.481), (32, 64.404), (48, 53.262), (64, 50.697), (64, 50.663),
    (48, 54.935), (32, 47.549), (24, 61.624), (16, 29.982), (12, 46.735), (8, 21.769),
    (6, 36.193), (4, 23.045), (3, 13.065), (2, 14.169), (1, 4.99), (16, 68.255), (24, 82.873),
    (32, 56.343), (64, 59.704)]
#: the GPU curve at CV 5%, seed 0: a knee the share test must still resolve (44, 0.934 of
#: the true best)
GPU_CV5_SEED0 = [
    (1, 0.402), (2, 0.757), (3, 0.958), (4, 1.118), (6, 1.197), (8, 1.398), (12, 1.463),
    (16, 1.861), (24, 1.764), (32, 1.799), (48, 1.719), (64, 1.849), (96, 2.048), (128, 1.866),
    (192, 1.998), (256, 1.973), (256, 1.914), (192, 2.036), (128, 2.116), (96, 1.978),
    (64, 1.953), (48, 1.996), (32, 1.799), (24, 1.752)]


def test_a_flat_looking_noisy_scan_is_not_resolved_though_its_refits_agree():
    """The bootstrap's share at the chosen value is narrowest where the fit is flattest; the
    share test fits the windows under the constraint and finds the low-share curve fits them
    nearly as well, so the choice at 0.77 of the truth is not resolved."""
    knee = fit_knee(windows(CPU_CV30_SEED148), GRID, 0.05, seed=148)
    assert knee.value == 22 and knee.share_low > 0.925      # the old rule: resolved
    assert not knee.resolved and knee.evidence[0] < knee.evidence[1]
    assert knee.verdict().startswith("not resolved at this noise") and knee.more_windows > 0


def test_a_quiet_knee_is_still_resolved_by_the_share_test():
    knee = fit_knee(windows(GPU_CV5_SEED0), relative_grid(1, 256), 0.05, seed=0)
    assert knee.value == 44 and knee.resolved and knee.evidence[0] > knee.evidence[1]
    assert "ruled out), resolved over 24 windows" in knee.verdict()


def test_each_later_look_needs_more_evidence_and_the_scan_counts_its_looks(monkeypatch):
    from scipy.stats import t as student

    from model_optimizer.search.core import fit as fit_module
    from model_optimizer.search.simulate.bench import REGIMES
    from model_optimizer.search.simulate.drive import run_search
    from model_optimizer.search.simulate.truth import curves

    first = fit_knee(windows(GPU_CV5_SEED0), relative_grid(1, 256), 0.05, seed=0)
    third = fit_knee(windows(GPU_CV5_SEED0), relative_grid(1, 256), 0.05, seed=0, look=3)
    assert first.evidence[0] == third.evidence[0]           # the same statistic
    dof = len(GPU_CV5_SEED0) - 4                              # the fit's, drift included
    assert first.evidence[1] == pytest.approx(student.ppf(1 - 0.025, dof), abs=1e-3)
    assert third.evidence[1] == pytest.approx(student.ppf(1 - 0.025 / 4, dof), abs=1e-3)
    looks = []
    real = fit_module.fit_knee

    def recording(*args, look=0, **kwargs):
        looks.append(look)
        return real(*args, look=look, **kwargs)

    monkeypatch.setattr("model_optimizer.search.sweep.fitscan.fit_knee", recording)
    # rise-fall at CV 10%, seed 3: narrowed for several rounds (not resolved at look 0)
    run_search(curves()["rise-fall"], REGIMES["cv10"], 3, "probe-fit")
    narrowed = sorted(set(looks))
    assert narrowed[:3] == [0, 1, 2]


def test_an_unresolved_knee_says_how_many_minutes_more_windows_would_take():
    from dataclasses import replace

    knee = fit_knee(windows(RUN5), GRID, 0.05)
    assert "minutes" not in knee.verdict()                # the pace is not known to the fit
    paced = replace(knee, window_s=30.0)
    minutes = round(knee.more_windows * 30 / 60)
    assert (f"about {knee.more_windows} more windows near the knee (about {minutes} minutes "
            "at this sweep's 30 s a window) would resolve it") in paced.verdict()
