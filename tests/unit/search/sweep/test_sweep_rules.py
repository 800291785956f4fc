"""Each sweep rule is written once (``recipe/sweep_rules.py``): the JSON Schema, the typed
spec, the recipe's rules, the sweep's config and flags and ``mopt sweep --help`` agree."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.errors import RecipeError, UsageError
from model_optimizer.recipe import load_recipe
from model_optimizer.recipe.schema import subschema
from model_optimizer.recipe.spec import SweepSpec
from model_optimizer.recipe.sweep_rules import (
    AUTO,
    DEFAULT_PARAM,
    SCANNING,
    STRATEGIES,
    STRATEGY_HELP,
    SWEEPABLE,
    param_problem,
    start_above_max,
)
from model_optimizer.search.sweep.flags import SweepFlags, build_config
from model_optimizer.search.sweep.model import SweepConfig, SweepConfigError
from model_optimizer.search.sweep.probe import resolve_strategy

TINY = Path(__file__).resolve().parents[4] / "recipes" / "tiny-cpu.yaml"


def sweep_help() -> str:
    """``mopt sweep --help`` as one line (a word wrapped at its hyphen joined again)."""
    output = CliRunner().invoke(app, ["sweep", "--help"]).output
    return " ".join(re.sub(r"-\n\s+", "-", output).split())


def diagnostics(*overrides: str) -> dict[str, tuple[str, str]]:
    with pytest.raises(RecipeError) as caught:
        load_recipe(TINY, list(overrides))
    return {d.path: (d.message, d.hint) for d in caught.value.diagnostics}


def test_the_strategy_names_agree():
    schema = subschema(("sweep", "strategy"))
    assert tuple(schema["enum"]) == STRATEGIES == typing.get_args(
        SweepSpec.model_fields["strategy"].annotation)
    assert schema["default"] == SweepSpec().strategy == AUTO
    assert set(SCANNING) < set(STRATEGIES) and list(STRATEGY_HELP) == list(STRATEGIES)
    text = sweep_help()
    for name in STRATEGIES:
        assert f"{name}: {STRATEGY_HELP[name]}" in text
        assert f"{name}:" in schema["description"]
    with pytest.raises(UsageError, match=f"choose one of {', '.join(STRATEGIES)}"):
        resolve_strategy("grid", load_recipe(TINY).resolved, SweepConfig(DEFAULT_PARAM, 1))


def test_the_default_param_agrees():
    assert subschema(("sweep", "param"))["default"] == SweepSpec().param == DEFAULT_PARAM
    assert SweepConfig.from_recipe({"start": 1}).param == DEFAULT_PARAM
    assert f"(default: the recipe's sweep.param, {DEFAULT_PARAM})" in sweep_help()


@pytest.mark.parametrize(("param", "values"), [("tensor_parallel_size", None),
                                               ("max_num_seq", None),
                                               ("kv_cache_dtype", None)])
def test_which_knobs_can_be_swept_is_one_rule_with_one_message(param, values):
    problem = param_problem(param, values)
    assert problem is not None
    assert diagnostics(f"sweep.param={param}")["sweep.param"] == (problem.message, problem.hint)
    recipe = load_recipe(TINY).resolved
    with pytest.raises(UsageError) as caught:
        build_config(recipe, SweepFlags(param=param))
    assert str(caught.value) == f"--param {param}: {problem}"
    assert f"one of {', '.join(SWEEPABLE)}" in sweep_help()
    assert param_problem("kv_cache_dtype", ["auto", "fp8"]) is None


def test_start_at_most_max_is_one_rule():
    problem = start_above_max(32, 16)
    assert problem is not None and start_above_max(16, 16) is None
    assert diagnostics("sweep.start=32", "sweep.max=16")["sweep.max"] == (problem.message,
                                                                          problem.hint)
    with pytest.raises(SweepConfigError, match=f"{problem.message} \\(after rounding\\)"):
        SweepConfig(DEFAULT_PARAM, 32, max=16)
