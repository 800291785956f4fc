"""--set overrides (typed by the schema, precedence) and the migration chain."""

import pytest

from model_optimizer.errors import RecipeError
from model_optimizer.recipe import load_recipe
from model_optimizer.recipe.migrate import migrate
from model_optimizer.recipe.yamlsource import SourceMap


def test_overrides_are_typed_and_win_over_the_file(write_recipe):
    loaded = load_recipe(write_recipe(), [
        "engine.max_num_seqs=32", "engine.enforce_eager=true", "workload.request_rate=2.5",
        "engine.env.VLLM_CPU_KVCACHE_SPACE=4", "model.served_name=123",
        "engine.block_size=null", "engine.max_num_seqs=16"])
    engine = loaded.resolved["engine"]
    assert engine["max_num_seqs"] == 16  # the later --set wins
    assert engine["enforce_eager"] is True
    assert engine["block_size"] is None
    assert engine["env"] == {"VLLM_CPU_KVCACHE_SPACE": 4}  # the schema admits numbers here
    assert loaded.resolved["workload"]["request_rate"] == 2.5
    assert loaded.resolved["model"]["served_name"] == "123"  # a string field stays a string
    assert loaded.overrides[0] == "engine.max_num_seqs=32"


def test_override_values_are_validated_like_the_file(write_recipe):
    with pytest.raises(RecipeError) as info:
        load_recipe(write_recipe(), ["engine.max_num_seqs=lots", "engine.max_num_sqs=3",
                                     "novalue"])
    diags = {d.file: d for d in info.value.diagnostics}
    assert "whole number" in diags["--set engine.max_num_seqs=lots"].message
    assert "did you mean 'max_num_seqs'" in diags["--set engine.max_num_sqs=3"].hint
    assert "has no '='" in diags["--set novalue"].message


def test_override_can_fix_an_invalid_file(write_recipe):
    from .conftest import VALID
    path = write_recipe(VALID.replace("max_num_seqs: 8", "max_num_seqs: 0"))
    assert load_recipe(path, ["engine.max_num_seqs=4"]).resolved["engine"]["max_num_seqs"] == 4


def test_migration_chain_runs_each_step_in_order():
    calls = []

    def v1_to_v2(doc):
        calls.append(1)
        seqs = doc.pop("seqs")
        return {**doc, "engine": {"max_num_seqs": seqs}}

    def v2_to_v3(doc):
        calls.append(2)
        return {**doc, "note": "v3"}

    doc, written = migrate({"recipe_version": 1, "seqs": 4}, SourceMap("x"), current=3,
                           migrations={1: v1_to_v2, 2: v2_to_v3})
    assert written == 1 and calls == [1, 2]
    assert doc == {"recipe_version": 3, "engine": {"max_num_seqs": 4}, "note": "v3"}


def test_current_version_needs_no_migration():
    doc, written = migrate({"recipe_version": 1, "name": "x"}, SourceMap("x"))
    assert written == 1 and doc == {"recipe_version": 1, "name": "x"}
