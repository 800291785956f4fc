"""SweepFlags reach the sweep config: a value given wins over the recipe's sweep section,
None leaves the recipe's; strategy and strict are the loop's, never config keys."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import pytest

from model_optimizer.recipe import load_recipe
from model_optimizer.search.sweep.flags import SweepFlags, build_config

ROOT = Path(__file__).resolve().parents[4]
LOOP_ONLY = {"strategy", "strict", "budget"}


@pytest.fixture
def recipe() -> dict:
    return load_recipe(ROOT / "recipes" / "tiny-cpu.yaml").resolved


@pytest.mark.parametrize(("name", "value", "expected"), [
    ("param", "max_num_batched_tokens", "max_num_batched_tokens"),
    ("start", 2, 2), ("growth", 4.0, 4.0), ("step", 3, 3), ("max", 32, 32),
    ("values", (8, 16), [8, 16]),
])
def test_a_flag_given_wins_over_the_recipe(recipe, name, value, expected):
    assert recipe["sweep"][name] != expected  # the recipe says something else
    config = build_config(recipe, SweepFlags(**{name: value}))
    assert getattr(config, name) == expected
    written = {**recipe, "sweep": {**recipe["sweep"], name: expected}}
    assert build_config(written) == config  # as if the recipe said it: nothing else moved


def test_no_flag_leaves_the_recipes_sweep_section(recipe):
    assert build_config(recipe, SweepFlags()) == build_config(recipe)
    config = build_config(recipe, SweepFlags(strategy="relaunch", strict=True))
    assert config == build_config(recipe)
    assert (config.param, config.start, config.max) == ("max_num_seqs", 1, 64)


def test_every_flag_but_the_loops_own_is_a_config_key():
    given = SweepFlags(param="max_num_seqs", start=1, growth=2.0, step=1, max=8,
                       values=("a",), strategy="auto", strict=True)
    assert set(given.config_keys()) == {f.name for f in fields(SweepFlags)} - LOOP_ONLY
    assert SweepFlags(strict=True, strategy="probe-fit").config_keys() == {}
    assert SweepFlags(values=()).config_keys() == {"values": []}  # --values "" is given
