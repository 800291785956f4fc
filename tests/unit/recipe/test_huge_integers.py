"""Huge workload and engine integers are refused at validation, before anything runs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.errors import RecipeError
from model_optimizer.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "recipes" / "tiny-cpu.yaml"
CEILINGS = {"workload.prompt_tokens": 1_048_576, "workload.output_tokens": 1_048_576,
            "workload.shared_prefix_tokens": 1_048_576, "workload.concurrency": 16_384,
            "workload.num_requests": 10_000_000, "workload.warmup_requests": 100_000,
            "engine.max_num_seqs": 16_384, "engine.max_model_len": 16_777_216,
            "engine.max_num_batched_tokens": 16_777_216}


@pytest.mark.parametrize("key", sorted(CEILINGS))
def test_a_value_over_the_ceiling_is_refused_at_its_key(key):
    with pytest.raises(RecipeError) as caught:
        load_recipe(TINY, [f"{key}={CEILINGS[key] + 1}"])
    found = [d for d in caught.value.diagnostics if d.path == key]
    assert found and str(CEILINGS[key]) in found[0].format(), caught.value.diagnostics


def test_a_float_max_num_seqs_of_1e23_never_reaches_vllm():
    with pytest.raises(RecipeError) as caught:
        load_recipe(TINY, ["engine.max_num_seqs=1e23"])
    assert [d.path for d in caught.value.diagnostics] == ["engine.max_num_seqs"]


def test_bench_refuses_a_huge_prompt_length_before_contacting_anything():
    started = time.monotonic()
    result = CliRunner().invoke(app, ["bench", "--url", "http://127.0.0.1:9",
                                      "--prompt-tokens", "99999999999999999999"])
    assert result.exit_code == 2, result.output
    assert "prompt_tokens" in result.output and time.monotonic() - started < 10


@settings(max_examples=40, deadline=None)
@given(key=st.sampled_from(sorted(CEILINGS)),
       value=st.integers(min_value=1, max_value=10**40))
def test_any_integer_is_accepted_or_refused_quickly(key, value):
    started = time.monotonic()
    try:
        load_recipe(TINY, [f"{key}={value}"])
        assert value <= CEILINGS[key]
    except RecipeError:
        pass
    assert time.monotonic() - started < 5
