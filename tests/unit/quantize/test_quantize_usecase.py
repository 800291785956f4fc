"""``usecase.quantize`` (what `mopt quantize` calls) from Python, with the stand-in quantizer
of conftest.py: the checkpoint made and pinned, the revision written where it was asked
to go; its refusals leave the recipe and the runs dir as they were."""

from __future__ import annotations

import pytest

from model_optimizer.errors import RecipeError, UsageError
from model_optimizer.events import QuantizeStarted
from model_optimizer.recipe import load_recipe, load_recipe_text
from model_optimizer.usecase import quantize


def test_a_loaded_recipe_quantized_with_a_scheme_and_its_revision_written_elsewhere(project):
    recipe, out, runs = project / "recipes" / "r.yaml", project / "recipes" / "q.yaml", \
        project / "runs"
    given, events = recipe.read_text(), []
    result = quantize(load_recipe(recipe), scheme="fp8_dynamic", output=out, runs_base=runs,
                      on_event=events.append)
    assert result.exit_code == 0 and result.recipe_file == out
    assert result.checkpoint == project / "models" / "m-fp8_dynamic"
    assert (result.checkpoint / "config.json").is_file()
    written = load_recipe(out).resolved
    assert written["revision"] == 2 and written["model"]["path"] == "../models/m-fp8_dynamic"
    assert written["model"]["pins"]["quantize"]["scheme"] == "fp8_dynamic"
    assert recipe.read_text() == given  # the given file untouched
    [started] = [e for e in events if isinstance(e, QuantizeStarted)]
    assert started.scheme == "fp8_dynamic" and started.archive == str(result.archive)
    assert result.archive.parent == runs
    assert result.to_dict()["pins"] == result.pins and result.to_dict()["recipe"] == str(out)


def test_a_file_s_revision_goes_over_it(project):
    recipe = project / "recipes" / "r.yaml"
    result = quantize(recipe, overrides=["quantize.scheme=w4a16"], runs_base=project / "runs")
    assert result.recipe_file == recipe
    assert load_recipe(recipe).resolved["model"]["path"] == "../models/m-w4a16"


def test_refusals_write_nothing(project):
    recipe, runs = project / "recipes" / "r.yaml", project / "runs"
    given = recipe.read_text()
    (project / "models" / "m-w4a16").mkdir()
    with pytest.raises(UsageError, match="exists; pass --force") as exists:
        quantize(recipe, runs_base=runs)
    with pytest.raises(RecipeError, match="mopt quantize --scheme") as scheme:
        quantize(recipe, scheme="w3a3", runs_base=runs)
    text = load_recipe_text(given)
    with pytest.raises(UsageError, match="this recipe has no file: give output") as no_file:
        quantize(text, runs_base=runs)
    assert exists.value.exit_code == scheme.value.exit_code == no_file.value.exit_code == 2
    assert recipe.read_text() == given and not runs.exists()
