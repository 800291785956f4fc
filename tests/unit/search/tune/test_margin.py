"""The tune's margin over the other combinations of the knobs it does not scan, by the
sweep's rule (``search/core/margin.py``, defined once): a winner clearly ahead of every other
block_size is resolved; one within the noise of another block_size is not, named with the
rival and its bound."""

from __future__ import annotations

import optuna
import pytest
from optuna.trial import TrialState

from model_optimizer.search.core.margin import compare, margin_share
from model_optimizer.search.core.sequential import t95
from model_optimizer.search.tune.margin import margin_warnings, tune_margin

DISTRIBUTIONS = {"max_num_seqs": optuna.distributions.IntDistribution(1, 64, log=True),
                 "block_size": optuna.distributions.CategoricalDistribution([32, 64, 128])}
NOISE = {"cv": 0.05, "values": 4, "windows": 10}      # t95(6) = 1.943


def trial(number: int, seqs: int, block_size: int, qps: float, *, feasible: bool = True,
          **attrs) -> optuna.trial.FrozenTrial:
    made = optuna.trial.create_trial(
        params={"max_num_seqs": seqs, "block_size": block_size},
        distributions=DISTRIBUTIONS, value=qps, state=TrialState.COMPLETE,
        user_attrs={"status": "ok", "feasible": feasible, **attrs})
    made.number = number
    return made


def params(seqs: int, block_size: int) -> dict:
    return {"max_num_seqs": seqs, "block_size": block_size}


def warnings_for(trials, chosen, confirmed, noise=NOISE) -> list[str]:
    return margin_warnings(chosen, trials, confirmed, "max_num_seqs", 0.05, noise)


def test_the_bound_is_the_sweeps_unpaired_rule():
    # mean 100 over 2 windows against 80 over 1 at CV 5%, t at 6 degrees of freedom
    got = compare("v", [99.0, 101.0], [80.0], NOISE)
    assert got.bound == pytest.approx(1.25 - t95(6) * 0.05 * (1 / 2 + 1) ** 0.5)
    assert got.paired is None and margin_share(0.05) == pytest.approx(0.90)


def test_two_pairs_or_more_give_the_paired_bound_when_it_is_the_better():
    pairs = [(100.0, 99.0), (102.0, 101.0), (98.0, 97.0)]     # a steady 1% lead
    got = compare("v", [100.0, 102.0, 98.0], [99.0, 101.0, 97.0], {**NOISE, "cv": 0.2}, pairs)
    assert got.paired is not None and got.paired.n == 3
    assert got.bound == pytest.approx(got.paired.bound()) and got.bound > 0.99
    # one pair is no spread: the unpaired bound alone
    assert compare("v", [100.0], [99.0], NOISE, pairs[:1]).paired is None


def test_a_winner_clearly_ahead_of_every_other_block_size_is_resolved():
    trials = [trial(0, 32, 64, 100.0), trial(1, 16, 64, 90.0),
              trial(2, 32, 32, 75.0), trial(3, 16, 32, 70.0), trial(4, 32, 128, 78.0)]
    chosen = trials[0]
    confirmed = [(params(32, 64), 99.0)]
    margin = tune_margin(chosen, trials, confirmed, "max_num_seqs", 0.05, NOISE)
    # every feasible configuration of the other block_sizes judged; none of its own
    assert {c.value["block_size"] for c in margin.comparisons} == {32, 128}
    assert len(margin.comparisons) == 3 and margin.shortfall is None
    assert warnings_for(trials, chosen, confirmed) == []


def test_a_tie_within_the_noise_is_not_resolved_and_names_the_rival():
    trials = [trial(0, 32, 64, 100.0), trial(1, 32, 32, 98.0), trial(2, 16, 32, 90.0),
              trial(3, 32, 128, 70.0)]
    [warning] = warnings_for(trials, trials[0], [(params(32, 64), 99.0)])
    bound = compare("v", [99.0], [98.0], NOISE).bound
    assert bound < 0.90
    assert "is not shown to be at least 90% of {'max_num_seqs': 32, 'block_size': 32}" in warning
    assert f"{bound:.3f}" in warning and "{'block_size': 32}" in warning
    # the other block_size the winner is clearly ahead of is not named
    assert "128" not in warning


def test_the_window_that_ranked_the_winner_does_not_vouch_for_it():
    # the winner's scan window read 10% high; its own launch reads level with the rival
    trials = [trial(0, 32, 64, 110.0), trial(1, 32, 32, 96.0)]
    confirmed = [(params(32, 64), 97.0)]
    margin = tune_margin(trials[0], trials, confirmed, "max_num_seqs", 0.05, NOISE)
    assert margin.weakest.bound == pytest.approx(compare("v", [97.0], [96.0], NOISE).bound)
    assert warnings_for(trials, trials[0], confirmed)
    # ... at a measured noise of zero every window counts, and the figures are exact
    exact = {**NOISE, "cv": 0.0}
    assert tune_margin(trials[0], trials, confirmed, "max_num_seqs", 0.05,
                       exact).weakest.bound == pytest.approx(103.5 / 96.0)
    assert warnings_for(trials, trials[0], confirmed, exact) == []


def test_a_rivals_confirming_launch_and_every_window_count_but_a_copied_twin():
    trials = [trial(0, 32, 64, 100.0), trial(1, 32, 32, 99.0), trial(2, 32, 32, 90.0),
              trial(3, 32, 32, 99.0, duplicate_of=1), trial(4, 8, 32, 95.0, feasible=False)]
    confirmed = [(params(32, 64), 100.0), (params(32, 32), 93.0)]
    margin = tune_margin(trials[0], trials, confirmed, "max_num_seqs", 0.05, NOISE)
    [against] = margin.comparisons            # the infeasible level is no rival
    assert against.bound == pytest.approx(compare("v", [100.0], [99.0, 90.0, 93.0],
                                                  NOISE).bound)


def test_without_a_window_beyond_the_ranking_one_or_a_noise_the_margin_is_not_shown():
    trials = [trial(0, 32, 64, 100.0), trial(1, 32, 32, 50.0)]
    [bare] = warnings_for(trials, trials[0], [])
    assert "no window beyond the one that ranked it" in bare
    [unknown] = warnings_for(trials, trials[0], [(params(32, 64), 100.0)], None)
    assert "cannot be judged" in unknown
    # nothing to compare with (one block_size measured): nothing to show
    assert warnings_for(trials[:1], trials[0], [(params(32, 64), 100.0)]) == []
