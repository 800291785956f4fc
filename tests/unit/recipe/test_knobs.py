"""The engine-knob table (``recipe/knobs.py``) against vLLM's parser, the schema, rendering
and the lists derived from it."""

from __future__ import annotations

import typing

import pytest

from model_optimizer.errors import RecipeError
from model_optimizer.recipe import load_recipe_text
from model_optimizer.recipe.flags import known_flags
from model_optimizer.recipe.knobs import KNOBS
from model_optimizer.recipe.render import engine_options
from model_optimizer.recipe.rules import (
    BOOL_KNOBS,
    CATEGORICAL_KNOBS,
    FIRST_CLASS_FLAGS,
    FLOAT_KNOBS,
    NUMERIC_KNOBS,
)
from model_optimizer.recipe.schema import subschema
from model_optimizer.recipe.spec import EngineSpec
from model_optimizer.recipe.vllm_flags import KNOWN_FLAGS

SCHEMA_TYPES = {"int": "integer", "float": "number", "bool": "boolean", "str": "string"}

EVERY_KNOB = """\
recipe_version: 1
name: every-knob
model: {path: /models/m, served_name: served, revision: main, tokenizer: /models/tok,
        quantization: fp8, dtype: bfloat16, trust_remote_code: true}
engine: {host: 127.0.0.1, port: 8001, kv_cache_dtype: fp8, block_size: 16, max_model_len: 2048,
         max_num_seqs: 8, max_num_batched_tokens: 4096, enable_chunked_prefill: true,
         long_prefill_token_threshold: 512, max_output_tokens: 256,
         gpu_memory_utilization: 0.8, enable_prefix_caching: true, tensor_parallel_size: 1,
         enforce_eager: true}
hardware: {accelerator: H100}
workload: {prompt_tokens: 128, output_tokens: 32, num_requests: 10}
"""


def test_every_flag_is_one_vllms_parser_knows():
    flags = {knob.flag for knob in KNOBS}
    assert flags <= KNOWN_FLAGS, flags - KNOWN_FLAGS  # vLLM 0.32.0's make_arg_parser
    installed, source = known_flags(flags)  # the installed vLLM's, where there is one
    assert flags <= installed, (source, flags - installed)
    assert len(flags) == len(KNOBS) and len({k.field for k in KNOBS}) == len(KNOBS)


def test_every_field_is_in_the_schema_with_the_tables_type():
    for knob in KNOBS:
        node = subschema(tuple(knob.field.split(".")))
        assert node is not None, knob.field
        types = node.get("type", [])
        types = [types] if isinstance(types, str) else types
        wanted = SCHEMA_TYPES[knob.kind]
        assert wanted in types or (wanted == "number" and "integer" in types) or \
            "enum" in node, (knob.field, types)


def test_rendering_follows_the_table():
    loaded = load_recipe_text(EVERY_KNOB, "every.yaml")
    flags = [flag for flag, _ in engine_options(loaded.resolved, None)]
    assert flags == [knob.flag for knob in KNOBS]  # every knob, in the table's order
    on_cpu = load_recipe_text(EVERY_KNOB.replace("accelerator: H100", "accelerator: cpu")
                              .replace("kv_cache_dtype: fp8", "kv_cache_dtype: auto")
                              .replace("block_size: 16", "block_size: 32")
                              .replace("quantization: fp8", "quantization: none"), "cpu.yaml")
    cpu_flags = {flag for flag, _ in engine_options(on_cpu.resolved, None)}
    assert {k.flag for k in KNOBS if k.gpu_only} & cpu_flags == set()


def test_the_derived_lists():
    assert {k.flag: k.field for k in KNOBS if k.exclusive} == FIRST_CLASS_FLAGS
    assert "override-generation-config" not in FIRST_CLASS_FLAGS  # shared with extra_args
    assert set(NUMERIC_KNOBS) == {k.name for k in KNOBS if k.sweep == "numeric"}
    assert set(CATEGORICAL_KNOBS) == {k.name for k in KNOBS if k.sweep == "categorical"}
    assert {"gpu_memory_utilization"} == FLOAT_KNOBS
    assert all(k.field.startswith("engine.") for k in KNOBS if k.sweep)


def test_the_boolean_knobs_are_the_tables_and_the_schema_and_spec_agree():
    assert {"enable_chunked_prefill", "enable_prefix_caching", "enforce_eager"} == BOOL_KNOBS
    hints = typing.get_type_hints(EngineSpec)
    for name in BOOL_KNOBS:
        node = subschema(("engine", name))
        types = node["type"] if isinstance(node["type"], list) else [node["type"]]
        assert set(types) - {"null"} == {"boolean"}, name
        assert set(typing.get_args(hints[name]) or (hints[name],)) - {type(None)} == {bool}
    every_bool = {name for name, hint in hints.items()
                  if set(typing.get_args(hint) or (hint,)) - {type(None)} == {bool}}
    assert every_bool == BOOL_KNOBS  # no boolean engine field outside the table


def test_a_tune_takes_only_booleans_for_a_boolean_knob():
    for name in BOOL_KNOBS:
        text = EVERY_KNOB + (f"tune:\n  params:\n    {name}: {{type: categorical, "
                             "choices: [1, true]}\n")
        with pytest.raises(RecipeError) as info:
            load_recipe_text(text, "t.yaml")
        assert any(f"not valid for engine.{name}" in d.message
                   for d in info.value.diagnostics), name
        load_recipe_text(text.replace("[1, true]", "[false, true]"), "t.yaml")
