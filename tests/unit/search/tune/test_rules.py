"""The recipe's tune section: schema and cross-field rules (every problem at once)."""

from __future__ import annotations

import pytest

from model_optimizer.errors import RecipeError
from model_optimizer.recipe import load_recipe_text

from .conftest import recipe_text


def problems(tune: str) -> list[str]:
    with pytest.raises(RecipeError) as caught:
        load_recipe_text(recipe_text(tune), "r.yaml")
    return [f"{d.path}: {d.message}" for d in caught.value.diagnostics]


def test_the_shipped_space_validates():
    loaded = load_recipe_text(recipe_text(), "r.yaml")
    assert loaded.resolved["tune"]["sampler"] == "tpe"
    assert loaded.resolved["tune"]["objective"] == "throughput"


@pytest.mark.parametrize("tune, expected", [
    ("tune: {params: {max_num_seq: {type: int, low: 1, high: 8}}}", "not an engine knob"),
    ("tune: {params: {max_num_seqs: {type: int, low: 8, high: 8}}}", "must be above low"),
    ("tune: {params: {max_num_seqs: {type: float, low: 1, high: 8}}}", "takes integers"),
    ("tune: {params: {max_num_seqs: {type: int_log, low: 0, high: 8}}}", "log scale needs"),
    ("tune: {params: {max_num_seqs: {type: int}}}", "needs low and high"),
    ("tune: {params: {kv_cache_dtype: {type: categorical}}}", "needs choices"),
    ("tune: {params: {kv_cache_dtype: {type: categorical, choices: [auto, fp9]}}}",
     "'fp9': not valid"),
    ("tune: {params: {kv_cache_dtype: {type: int, low: 1, high: 2}}}", "is categorical"),
    ("tune: {params: {block_size: {type: categorical, choices: [32, 48]}}}",
     "multiples of 32"),
    ("tune: {params: {block_size: {type: int, low: 32, high: 128}}}", "multiples of 32"),
    ("tune: {params: {enforce_eager: {type: categorical, choices: [1, true]}}}",
     "1: not valid"),
    ("tune: {sampler: grid, params: {gpu_memory_utilization: {type: float, low: 0.5, "
     "high: 0.9}}}", "finite set"),
    ("tune: {params: {max_num_seqs: {type: int, low: 1, high: 8, bogus: 1}}}", "bogus"),
    ("tune: {objective: latency}", "latency"),
])
def test_bad_spaces_are_reported_with_their_path(tune, expected):
    found = problems(tune)
    assert any(expected in p and p.startswith("tune") for p in found), found


def test_a_cpu_block_size_range_on_a_32_grid_is_fine():
    load_recipe_text(recipe_text("tune: {params: {block_size: {type: int, low: 32, high: 128, "
                                 "step: 32}}}"), "r.yaml")
