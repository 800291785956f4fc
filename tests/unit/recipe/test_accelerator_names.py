"""One rule of accelerator names for validate, init and plan (issue 37): any case, the
same aliases, and a did-you-mean that stays in the family."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.errors import RecipeError
from model_optimizer.plan.accelerators import PlanError, canonical_accelerator
from model_optimizer.recipe import load_recipe_text

from .conftest import VALID


def with_accelerator(name: str) -> str:
    return VALID.replace("accelerator: A10", f"accelerator: {name}")


@pytest.mark.parametrize(("typed", "row"), [("h100", "H100"), ("mi300x", "MI300X"),
                                             ("Mi300X", "MI300X"), ("a100-80g", "A100-80GB"),
                                             ("CPU", "cpu"), (" l40s ", "L40S")])
def test_validate_takes_any_case_and_the_aliases_init_takes(typed, row):
    loaded = load_recipe_text(with_accelerator(f"'{typed}'"))
    assert loaded.resolved["hardware"]["accelerator"] == row == canonical_accelerator(typed)
    assert loaded.spec.hardware.accelerator == row
    overridden = load_recipe_text(VALID, overrides=[f"hardware.accelerator={typed.strip()}"])
    assert overridden.resolved["hardware"]["accelerator"] == row


@pytest.mark.parametrize(("typed", "hint"), [
    ("a100", "did you mean 'A100-40GB' or 'A100-80GB'?"),
    ("mi250", "did you mean 'MI300X'?"),
    ("h300", "did you mean 'H100' or 'H200'?"),
])
def test_an_unknown_name_gets_the_planner_s_suggestion(typed, hint):
    with pytest.raises(RecipeError) as info:
        load_recipe_text(with_accelerator(typed), "r.yaml")
    [diag] = info.value.diagnostics
    assert diag.path == "hardware.accelerator" and diag.hint == hint
    assert (diag.line, diag.column) == (10, 16)
    with pytest.raises(PlanError, match=re.escape(hint)):  # init's and plan's message
        canonical_accelerator(typed)


def test_the_validate_command_accepts_a_lower_case_name(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(with_accelerator("h100"))
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
