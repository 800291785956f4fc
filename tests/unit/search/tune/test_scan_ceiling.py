"""A scan server that does not fit lowers the tune's scan ceiling: the trial launches again
lower, later trials of the same other knobs start lower, a level at or above a launch that
did not fit is infeasible without a launch, another block_size's failure is a hint only,
and a failure that is not memory still falls back to the asked configuration alone."""

from __future__ import annotations

from optuna.trial import TrialState

from model_optimizer.search.core.scanrules import lower_ceiling
from model_optimizer.search.tune.ceiling import LAUNCHES_ATTR, MAX_SCAN_LAUNCHES

from .fake_scan import FakeEngine, make_scanner, run_trial


def test_the_ceiling_is_halved_toward_the_highest_level_that_started():
    assert lower_ceiling(64, None, 1) == 32          # nothing started yet: halved
    assert lower_ceiling(64, 32, 1) == 48            # halfway from what started
    assert lower_ceiling(41, 40, 1) == 40
    assert lower_ceiling(2, None, 4) == 4            # never below the range's low end
    assert lower_ceiling(64, 80, 1) == 32            # a start above the failure is ignored


def test_a_ceiling_that_does_not_fit_is_lowered_for_this_and_later_trials():
    engine = FakeEngine(fits=40)
    scanner, study, config = make_scanner(engine)
    first = run_trial(scanner, study, config, {"max_num_seqs": 8, "block_size": 32})
    # 64 did not start (oom): the same trial scans again at 32, every level up to it
    assert engine.launched == [64, 32]
    assert first["status"] == "ok" and first["launches"] == 2
    assert first["scan"]["ceiling"] == 32 and first["scan"]["windows"] == 6
    assert [x["started"] for x in first[LAUNCHES_ATTR]] == [False, True]
    assert not engine.measured                       # no launch of the asked level alone
    run_trial(scanner, study, config, {"max_num_seqs": 16, "block_size": 32})
    assert engine.launched[2:] == [32]               # later trials start from the lowered one
    above = run_trial(scanner, study, config, {"max_num_seqs": 64, "block_size": 32})
    assert engine.launched[3:] == []                 # at the failed level: not launched
    assert above["status"] == "failed" and above["failure_kind"] == "oom"
    assert above["launches"] == 0 and "did not start" in above["reason"]
    between = run_trial(scanner, study, config, {"max_num_seqs": 48, "block_size": 32})
    assert engine.launched[3:] == [48]               # unknown: launched, did not fit
    assert between["status"] == "failed" and between["launches"] == 1
    run_trial(scanner, study, config, {"max_num_seqs": 56, "block_size": 32})
    assert engine.launched[4:] == []                 # above 48 now: not launched
    # before the fix: every trial launched 64 and then its asked level alone (10 launches)
    assert len(engine.launched) == 4


def test_another_block_sizes_failure_lowers_the_scan_but_not_the_asked_level():
    engine = FakeEngine(fits=40)
    scanner, study, config = make_scanner(engine)
    run_trial(scanner, study, config, {"max_num_seqs": 8, "block_size": 32})
    assert engine.launched == [64, 32]
    other = run_trial(scanner, study, config, {"max_num_seqs": 8, "block_size": 64})
    assert engine.launched[2:] == [32]               # the hint: its scan starts at 32
    assert other["status"] == "ok"
    asked = run_trial(scanner, study, config, {"max_num_seqs": 40, "block_size": 64})
    assert engine.launched[3:] == [40]               # a hint never makes a level infeasible
    assert asked["status"] == "ok"
    levels = [t for t in study.get_trials(states=(TrialState.COMPLETE,))
              if t.params["block_size"] == 64 and t.user_attrs.get("status") == "ok"]
    assert max(t.params["max_num_seqs"] for t in levels) == 40


def test_a_trial_launches_at_most_three_scan_servers():
    engine = FakeEngine(fits=0)                      # nothing fits at all
    scanner, study, config = make_scanner(engine)
    record = run_trial(scanner, study, config, {"max_num_seqs": 8, "block_size": 32})
    assert len(engine.launched) == MAX_SCAN_LAUNCHES == 3
    assert engine.launched == [64, 32, 8]            # the last one at the asked level alone
    assert record["status"] == "failed" and record["launches"] == 3
    run_trial(scanner, study, config, {"max_num_seqs": 16, "block_size": 32})
    assert len(engine.launched) == 3                 # above 8: infeasible, not launched


def test_a_start_failure_that_is_not_memory_launches_the_asked_configuration_alone():
    engine = FakeEngine(fits=0, failure="invalid_config")
    scanner, study, config = make_scanner(engine)
    record = run_trial(scanner, study, config, {"max_num_seqs": 8, "block_size": 32})
    assert engine.launched == [64, 8] and engine.measured == [
        {"max_num_seqs": 8, "block_size": 32}]
    assert record["scan"]["failed"] == "invalid_config" and record["launches"] == 2
    run_trial(scanner, study, config, {"max_num_seqs": 4, "block_size": 32})
    assert engine.launched[2:] == [64, 4]            # no memory fact: the ceiling stays
