"""The typed recipe view (``LoadedRecipe.spec``) and ``schemas/recipe.v1.json`` agree."""

import copy
from pathlib import Path

import pydantic
import pytest

from model_optimizer.recipe import load_recipe, load_recipe_text
from model_optimizer.recipe.schema import recipe_schema
from model_optimizer.recipe.spec import RecipeSpec
from tests.unit.recipe.conftest import VALID
from tests.unit.recipe.spec_check import disagreements
from tests.unit.recipe.test_shipped import SHIPPED


def test_view_and_schema_agree():
    assert disagreements(RecipeSpec, recipe_schema()) == []


def _schema() -> dict:
    return copy.deepcopy(recipe_schema())


def _engine(schema: dict) -> dict:
    return schema["properties"]["engine"]["properties"]


def _added_property(schema):
    _engine(schema)["swap_space"] = {"type": ["number", "null"], "default": None}
    return "engine: schema property 'swap_space' has no field in EngineSpec"


def _removed_property(schema):
    del schema["properties"]["workload"]["properties"]["seed"]
    return "workload: field 'seed' of WorkloadSpec is not in the schema"


def _changed_enum(schema):
    schema["properties"]["sweep"]["properties"]["strategy"]["enum"].append("bisect")
    return "sweep.strategy: enum"


def _changed_default(schema):
    _engine(schema)["host"]["default"] = "0.0.0.0"
    return "engine.host: default '127.0.0.1' in the view, '0.0.0.0' in the schema"


def _changed_type(schema):
    _engine(schema)["max_num_seqs"]["type"] = ["number", "null"]
    return "engine.max_num_seqs: type ['integer', 'null'] in the view"


def _nested_map_value(schema):
    mix = schema["properties"]["workload"]["properties"]["mix"]["additionalProperties"]
    mix["properties"]["weight"]["default"] = 2
    return "workload.mix.*.weight: default 1 in the view, 2 in the schema"


def _array_items(schema):
    schema["properties"]["quantize"]["properties"]["ignore"]["items"] = {"type": "integer"}
    return "quantize.ignore[]: type ['string'] in the view, ['integer'] in the schema"


def _made_required(schema):
    schema["properties"]["model"]["required"].append("tokenizer")
    return "model.tokenizer: required True in the schema, False in the view"


def _opened_object(schema):
    schema["properties"]["hardware"]["additionalProperties"] = {"type": "string"}
    return "hardware: a typed map in the schema, not in the view"


@pytest.mark.parametrize("mutate", [_added_property, _removed_property, _changed_enum,
                                    _changed_default, _changed_type, _nested_map_value,
                                    _array_items, _made_required, _opened_object],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_disagreement_is_found_and_named(mutate):
    schema = _schema()
    expected = mutate(schema)
    found = disagreements(RecipeSpec, schema)
    assert any(problem.startswith(expected) for problem in found), found


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_the_view_holds_exactly_the_resolved_recipe(path: Path):
    loaded = load_recipe(path)
    assert loaded.spec.to_dict() == loaded.resolved


def test_attribute_access_reads_the_resolved_values():
    loaded = load_recipe_text(VALID, overrides=["workload.mix.a.prompt_tokens=8",
                                                "workload.mix.a.output_tokens=4"])
    spec = loaded.spec
    assert spec.engine.max_num_seqs == 8 and spec.hardware.accelerator == "A10"
    assert spec.model.served_name == "demo"  # derived by resolve
    assert spec.workload.duration_s == 20 and isinstance(spec.workload.duration_s, int)
    assert spec.workload.mix["a"].prompt_tokens == 8 and spec.workload.mix["a"].weight == 1
    assert spec.engine.allow_code == () and spec.validated is None
    assert spec.json_schema is None and spec.quantize.ignore == ("lm_head",)


def test_the_view_is_frozen_and_refuses_unknown_keys():
    spec = load_recipe_text(VALID).spec
    with pytest.raises(pydantic.ValidationError):
        spec.engine.max_num_seqs = 4
    resolved = load_recipe_text(VALID).resolved
    resolved["engine"]["swap_space"] = 4
    with pytest.raises(pydantic.ValidationError, match="swap_space"):
        RecipeSpec.of(resolved)


def test_sets_any_slo_counts_a_bound_or_a_classes_section():
    assert not load_recipe_text(VALID).spec.slo.sets_any()
    assert load_recipe_text(VALID, overrides=["slo.ttft_p99_ms=500"]).spec.slo.sets_any()
    classes_only = load_recipe_text(VALID, overrides=[
        "workload.mix.a.prompt_tokens=8", "workload.mix.a.output_tokens=4",
        "slo.classes.a.ttft_p99_ms=300"]).spec.slo
    assert classes_only.sets_any() and classes_only.ttft_p99_ms is None
