"""The simulated tune: the surfaces' known answers, the real tune finding them at zero noise,
and the figures computed as the table defines them."""

import pytest

from model_optimizer.search.simulate.bench import REGIMES, WARMUP_S
from model_optimizer.search.simulate.truth import surfaces
from model_optimizer.search.simulate.tunedrive import TuneRun, run_tune
from model_optimizer.search.simulate.tunetable import summarise_tune
from model_optimizer.search.tune.confirm import CONFIRM_CANDIDATES

QUIET = REGIMES["cv0"]
LAUNCH_S, WINDOW_S = QUIET.launch_s(False), WARMUP_S + QUIET.window_s


def test_the_surfaces_know_their_best_configuration():
    shapes = surfaces()
    assert "categorical" not in shapes
    assert shapes["monotone"].best()[0] == {"max_num_seqs": 64, "block_size": 64}
    assert shapes["oom-ceiling"].best()[0] == {"max_num_seqs": 40, "block_size": 64}
    assert shapes["slo-edge"].best()[0] == {"max_num_seqs": 24, "block_size": 64}
    monotone = shapes["monotone"]
    assert monotone.ratio({"max_num_seqs": 64, "block_size": 32}) == pytest.approx(1 / 1.03)
    assert shapes["oom-ceiling"].ratio({"max_num_seqs": 41, "block_size": 64}) == 0.0
    assert monotone.ratio(None) == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_at_zero_noise_the_tune_writes_the_known_best_exactly(seed):
    surface = surfaces()["monotone"]
    run = run_tune(surface, QUIET, seed)
    assert run.chosen == surface.best()[0]
    assert run.trials == 12                       # the recipe's budget, all asked
    # scanning: at most one launch per trial (a repeated configuration none), plus the
    # chosen trial's own launch; every window measured on those launches
    assert 3 <= run.launches <= run.trials + 1
    assert run.windows > run.launches
    assert run.wall_s == run.launches * LAUNCH_S + run.windows * WINDOW_S


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_at_zero_noise_the_tune_reaches_a_flat_top_with_the_best_block_size(seed):
    surface = surfaces()["knee-flat"]     # every max_num_seqs >= 20 is the best
    run = run_tune(surface, QUIET, seed)
    assert run.chosen["block_size"] == 64 and run.chosen["max_num_seqs"] >= 20
    assert surface.ratio(run.chosen) == pytest.approx(1.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_scan_server_above_the_memory_ceiling_lowers_the_scan_ceiling(seed):
    surface = surfaces()["oom-ceiling"]
    run = run_tune(surface, QUIET, seed)
    # the launch at 64 fails (OOM above 40): the trial scans again lower, later trials start
    # from the lowered ceiling, and a level at or above a failed launch is not launched: about
    # one launch per trial (before: two, 25 in all, and no level scanned)
    assert run.launches <= run.trials + CONFIRM_CANDIDATES
    assert run.windows > run.trials + CONFIRM_CANDIDATES
    assert surface.ratio(run.chosen) >= 0.95


def test_the_figures_are_computed_as_defined():
    surface = surfaces()["monotone"]
    best = surface.best()[0]
    runs = [TuneRun(best, 10, 12, 30, 600.0),
            TuneRun({"max_num_seqs": 64, "block_size": 32}, 12, 12, 32, 1200.0),  # 0.971
            TuneRun({"max_num_seqs": 16, "block_size": 64}, 14, 12, 20, 900.0),   # < 0.90
            TuneRun(None, 20, 11, 10, 300.0)]                                     # not written
    row = summarise_tune(surface, "cv5", runs)
    low = surface.ratio({"max_num_seqs": 16, "block_size": 64})
    assert 0 < low < 0.9
    assert row.reps == 4
    assert row.ratio_p5 == 0.0                    # the lowest of 4: the unwritten run
    assert row.ratio_median == pytest.approx((low + 1 / 1.03) / 2)
    assert (row.at_least_95, row.at_least_90) == (0.5, 0.5)
    assert (row.launches, row.max_launches, row.trials, row.windows) == (13, 20, 12, 25)
    assert row.wall_min == pytest.approx(12.5)
    assert row.knob_right == 0.5                  # best and the 16-sequence run
    assert row.written == 0.75
    assert row.confidently_wrong == 0.25          # written below 0.90; unwritten is not
    # the sweep table's calibration: among the 3 resolved (written, not warned), 1 below 0.90
    assert row.resolved == 0.75 and row.calibration == pytest.approx(1 / 3)
    # ... and that one named for the table's list of cases (no seed given here)
    assert row.wrong_cases == ((None, {"max_num_seqs": 16, "block_size": 64}, low),)


def test_a_revision_the_tune_said_was_not_resolved_is_not_confidently_wrong():
    surface = surfaces()["monotone"]
    low = {"max_num_seqs": 16, "block_size": 64}                             # < 0.90
    row = summarise_tune(surface, "cv5", [TuneRun(low, 14, 12, 20, 900.0, warned=True),
                                          TuneRun(low, 14, 12, 20, 900.0)])
    assert row.warned == 0.5 and row.confidently_wrong == 0.5
    # resolved 1 of 2; among the resolved, 1 of 1 below 0.90 (the warned one not counted)
    assert row.resolved == 0.5 and row.calibration == 1.0
    assert row.cells()[-2:] == ["50.0%", "100.0%"]


@pytest.mark.parametrize(("name", "seed", "written", "why"), [
    # resolved before the cut-range check (2026-12-07, 300 repetitions at CV 5%): the winner
    # below a launch that did not fit (oom-ceiling: 29 below 58, truth 0.894) or below a level
    # that missed the SLO (slo-edge: 19 below 32, truth 0.866)
    ("oom-ceiling", 15, {"max_num_seqs": 29, "block_size": 32}, "did not start for memory"),
    ("slo-edge", 7, {"max_num_seqs": 19, "block_size": 128}, "32 was infeasible"),
])
def test_a_winner_below_a_range_a_failure_cut_off_is_not_resolved(name, seed, written, why):
    surface = surfaces()[name]
    run = run_tune(surface, REGIMES["cv5"], seed)
    assert run.chosen == written and surface.ratio(run.chosen) < 0.90
    assert run.warned and any(why in w and "cut-range" in w for w in run.warnings)



def test_a_wrong_block_size_by_a_hair_is_not_resolved():
    # resolved before the margin over the other combinations (2026-12-07, 300 repetitions at
    # CV 5%): 42 x 32 at 0.898 of the true best, its own launch level with 61 x 32 and the
    # scan's 64 x 64 and 64 x 128 within the noise of it. The other three cases of that run
    # (OOM seed 178, SLO edge seeds 48 and 172) stay resolved: no other block_size was
    # measured above 16 there (a failure cut their scans off), so every value the tune
    # measured is clearly below the choice and the margin over them is shown
    surface = surfaces()["monotone"]
    run = run_tune(surface, REGIMES["cv5"], 52)
    assert run.chosen == {"max_num_seqs": 42, "block_size": 32}
    assert surface.ratio(run.chosen) < 0.90
    margin = [w for w in run.warnings if "is not shown to be at least 90% of" in w]
    assert run.warned and len(margin) == 2
    assert "cannot tell {'block_size': 64} apart" in margin[0]
    assert "cannot tell {'block_size': 128} apart" in margin[1]
