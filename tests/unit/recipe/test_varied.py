"""One typed way to vary a recipe: ``LoadedRecipe.varied`` sets typed values, re-runs the
loader's schema and rule checks, and records each value's source for diagnostics, run.json
and a rollback; ``--set`` texts are parsed once into the same variations."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from model_optimizer.archive.start import _recipe_fields
from model_optimizer.errors import RecipeError
from model_optimizer.recipe import Variation, archived_overrides, load_recipe, load_recipe_text

from .conftest import VALID

ROOT = Path(__file__).resolve().parents[3]


def test_varied_sets_typed_values_after_the_set_texts(write_recipe):
    loaded = load_recipe(write_recipe(), ["engine.max_num_seqs=4", "workload.concurrency=2"])
    step = loaded.varied({"engine.max_num_seqs": 64.0, "workload.concurrency": 8},
                         source="sweep value 64")
    assert step.resolved["engine"]["max_num_seqs"] == 64
    assert type(step.resolved["engine"]["max_num_seqs"]) is int  # never "64.0" in the argv
    assert step.spec.engine.max_num_seqs == 64 and step.resolved["workload"]["concurrency"] == 8
    assert step.path == loaded.path and step.source_text == loaded.source_text
    assert step.overrides == ["engine.max_num_seqs=4", "workload.concurrency=2"]
    assert step.varied_values == [Variation("engine.max_num_seqs", 64, "sweep value 64"),
                                  Variation("workload.concurrency", 8, "sweep value 64")]
    assert loaded.resolved["engine"]["max_num_seqs"] == 4  # the original is untouched
    again = step.varied({"engine.max_num_seqs": 16}, "sweep value 16")
    assert again.resolved["engine"]["max_num_seqs"] == 16  # the later value wins
    assert len(again.varied_values) == 3


def test_a_float_knob_keeps_its_fraction(write_recipe):
    step = load_recipe(write_recipe()).varied({"engine.gpu_memory_utilization": 0.85}, "t")
    assert step.resolved["engine"]["gpu_memory_utilization"] == 0.85


def test_the_schema_refuses_a_value_and_names_its_source(write_recipe):
    loaded = load_recipe(write_recipe())
    with pytest.raises(RecipeError) as info:
        loaded.varied({"engine.max_num_seqs": 0, "engine.max_num_sqs": 3}, "sweep value 0")
    found = {d.path: d for d in info.value.diagnostics}
    assert found["engine.max_num_seqs"].file == "sweep value 0"
    assert "must be >= 1" in found["engine.max_num_seqs"].message
    assert found["engine.max_num_sqs"].file == "sweep value 0"
    assert "did you mean 'max_num_seqs'" in found["engine.max_num_sqs"].hint


def test_the_rules_run_again(write_recipe):
    loaded = load_recipe(write_recipe())  # max_num_batched_tokens: 512
    with pytest.raises(RecipeError) as info:
        loaded.varied({"engine.max_num_seqs": 1024}, "sweep value 1024")
    assert "smaller than max_num_seqs (1024)" in info.value.diagnostics[0].message


def test_set_texts_and_variations_are_one_ordered_list(write_recipe):
    typed = Variation("engine.max_num_seqs", 32, "mopt bench --concurrency")
    loaded = load_recipe(write_recipe(), [typed, "engine.max_num_seqs=16"])
    assert loaded.resolved["engine"]["max_num_seqs"] == 16  # the --set after it wins
    assert [v.source for v in loaded.variations] == ["mopt bench --concurrency",
                                                     "--set engine.max_num_seqs=16"]
    assert loaded.overrides == ["engine.max_num_seqs=16"]


def test_run_json_records_the_varied_values_and_a_rollback_restores_them(write_recipe):
    loaded = load_recipe(write_recipe(), ["workload.concurrency=2"]).varied(
        {"engine.max_num_seqs": 64}, "sweep value 64")
    fields = _recipe_fields(loaded)
    assert fields["overrides"] == ["workload.concurrency=2"]
    assert fields["varied"][0] == {"key": "engine.max_num_seqs", "value": 64,
                                   "source": "sweep value 64"}
    restored = load_recipe_text(VALID, "r.yaml",
                                archived_overrides(fields["overrides"], fields["varied"]))
    assert restored.resolved["engine"]["max_num_seqs"] == 64
    assert restored.resolved["workload"]["concurrency"] == 2
    assert restored.varied_values == loaded.varied_values


#: an f-string that builds a recipe override's text: ``f"engine.{k}={v}"`` and the like
_BUILDER = re.compile(r"""f["'](?:engine|workload|model|quantize)\.[\w.{}-]*=\{""")
#: writes the exported container's command line (right), and the deprecated wrapper that
#: search/sweep/steps.py still calls until it calls LoadedRecipe.varied itself
_ALLOWED = {"model_optimizer/export/kubernetes.py", "model_optimizer/search/core/knobs.py"}


def test_no_module_builds_override_text():
    found = [f"{path.relative_to(ROOT)}:{number}"
             for path in sorted((ROOT / "model_optimizer").rglob("*.py"))
             if str(path.relative_to(ROOT)) not in _ALLOWED
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if _BUILDER.search(line)]
    assert found == []
