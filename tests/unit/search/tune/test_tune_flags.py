"""TuneFlags reach the tune config: a value given wins over the recipe's tune section, None
leaves the recipe's."""

from __future__ import annotations

from dataclasses import fields

import pytest

from model_optimizer.search.tune.space import TuneConfig, TuneFlags

SECTION = {"params": {"max_num_seqs": {"type": "int_log", "low": 1, "high": 32}},
           "objective": "throughput", "second_objective": None, "n_trials": 12,
           "max_minutes": None, "sampler": "tpe", "seed": 0, "repeats": 1,
           "strategy": "auto"}


@pytest.mark.parametrize(("name", "value"), [
    ("n_trials", 3), ("max_minutes", 1.5), ("sampler", "random"), ("seed", 7),
    ("strategy", "relaunch"),
])
def test_a_flag_given_wins_over_the_recipe(name, value):
    assert SECTION[name] != value
    config = TuneConfig.from_recipe(SECTION, TuneFlags(**{name: value}))
    assert getattr(config, name) == value
    assert TuneConfig.from_recipe({**SECTION, name: value}) == config  # nothing else moved


def test_no_flag_leaves_the_recipes_tune_section():
    plain = TuneConfig.from_recipe(SECTION)
    assert TuneConfig.from_recipe(SECTION, TuneFlags()) == plain
    assert (plain.n_trials, plain.sampler, plain.seed, plain.strategy) == (12, "tpe", 0, "auto")


def test_every_flag_is_a_tune_config_field():
    config_fields = {f.name for f in fields(TuneConfig)}
    assert {f.name for f in fields(TuneFlags)} <= config_fields
    assert TuneFlags(n_trials=2, seed=None).given() == {"n_trials": 2}
