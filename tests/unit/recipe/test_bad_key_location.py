"""A key the schema refuses by name is blamed where it was written: its --set, or its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_optimizer.errors import RecipeError
from model_optimizer.recipe import load_recipe

TINY = Path(__file__).resolve().parents[3] / "recipes" / "tiny-cpu.yaml"


def test_an_invalid_unicode_env_key_from_set_is_blamed_on_the_set():
    with pytest.raises(RecipeError) as caught:
        load_recipe(TINY, ["engine.env.ÉX=1"])
    [found] = caught.value.diagnostics
    assert found.file == "--set engine.env.ÉX=1" and found.line is None
    assert found.path == "engine.env.ÉX"


def test_an_invalid_env_key_in_the_file_is_blamed_on_its_own_line(tmp_path):
    recipe = tmp_path / "r.yaml"
    recipe.write_text('recipe_version: 1\nname: t\nmodel: {path: m}\nengine:\n  env:\n'
                      '    OK: "1"\n    "A-B": "2"\n')
    with pytest.raises(RecipeError) as caught:
        load_recipe(recipe)
    [found] = caught.value.diagnostics
    assert (found.line, found.column, found.path) == (7, 5, "engine.env.A-B")
