"""workload.mix: length distributions, class weights, determinism, and the recipe rules."""

from __future__ import annotations

import statistics
import textwrap

import pytest

from model_optimizer.errors import RecipeError
from model_optimizer.mix import MixSampler, parse_length, parse_mix
from model_optimizer.recipe import load_recipe

MIX = {"short": {"weight": 9, "prompt_tokens": {"dist": "uniform", "min": 8, "max": 32},
                 "output_tokens": 16},
       "long": {"weight": 1, "prompt_tokens": {"dist": "lognormal", "median": 400,
                                               "sigma": 0.5, "min": 100, "max": 900},
                "output_tokens": {"dist": "normal", "mean": 64, "stddev": 16, "max": 128}}}


def test_draws_stay_in_bounds_and_follow_weights():
    sampler = MixSampler(parse_mix(MIX), seed=3)
    draws = [sampler.draw(index) for index in range(3000)]
    short = [d for d in draws if d.request_class == "short"]
    long_ = [d for d in draws if d.request_class == "long"]
    assert 0.85 < len(short) / len(draws) < 0.95
    assert all(8 <= d.prompt_tokens <= 32 and d.output_tokens == 16 for d in short)
    assert all(100 <= d.prompt_tokens <= 900 and 1 <= d.output_tokens <= 128 for d in long_)
    assert 300 < statistics.median(d.prompt_tokens for d in long_) < 500
    assert 54 < statistics.mean(d.output_tokens for d in long_) < 74
    assert len({d.prompt_tokens for d in short}) == 25  # every value of 8..32 drawn


def test_request_i_depends_only_on_seed_and_i():
    first, second = MixSampler(parse_mix(MIX), 1), MixSampler(parse_mix(MIX), 1)
    assert [second.draw(i) for i in range(50, 0, -1)][::-1] == [first.draw(i)
                                                               for i in range(1, 51)]
    assert [MixSampler(parse_mix(MIX), 2).draw(i) for i in range(20)] != \
        [first.draw(i) for i in range(20)]
    assert first.longest() == (900, 128)


@pytest.mark.parametrize(("value", "words"), [
    (0, "at least 1"),
    ("64", "whole number or"),
    ({"dist": "gamma", "max": 3}, "dist must be one of"),
    ({"dist": "normal", "mean": 3, "max": 9}, "needs stddev"),
    ({"dist": "uniform", "min": 9, "max": 3}, "1 <= min <= max"),
    ({"dist": "uniform", "max": 3, "sigma": 1}, "not sigma"),
    ({"dist": "lognormal", "median": 0, "sigma": 1, "max": 9}, "median > 0"),
])
def test_bad_lengths_are_named(value, words):
    with pytest.raises(ValueError, match=words):
        parse_length(value, "workload.mix.a.prompt_tokens")


def test_describe_reads_like_the_recipe():
    assert parse_length(64, "x").describe() == "64"
    assert parse_length({"dist": "uniform", "min": 2, "max": 9}, "x").describe() == \
        "uniform 2..9"


RECIPE = textwrap.dedent("""\
    recipe_version: 1
    name: mix
    model: {path: some/model}
    engine: {max_model_len: 1024}
    hardware: {accelerator: A10}
    workload:
      mix:
        short: {weight: 9, prompt_tokens: 32, output_tokens: 16}
        long: {weight: 1, prompt_tokens: {dist: uniform, min: 200, max: 900}, output_tokens: 64}
    slo:
      ttft_p99_ms: 2000
      classes:
        short: {ttft_p99_ms: 300}
    """)


def test_a_mix_recipe_validates_and_keeps_its_classes(tmp_path):
    path = tmp_path / "mix.yaml"
    path.write_text(RECIPE)
    loaded = load_recipe(path)
    assert list(loaded.resolved["workload"]["mix"]) == ["short", "long"]
    assert loaded.resolved["slo"]["classes"]["short"]["ttft_p99_ms"] == 300


@pytest.mark.parametrize(("change", "where", "words"), [
    (("short: {ttft_p99_ms: 300}", "shrot: {ttft_p99_ms: 300}"), "slo.classes.shrot",
     "no class 'shrot' in workload.mix"),
    (("max_model_len: 1024", "max_model_len: 900"), "engine.max_model_len",
     "longest request (900 prompt + 64 output"),
    (("max: 900}", "max: 900, mean: 3}"), "workload.mix.long.prompt_tokens",
     "uniform takes min, max, not mean"),
    (("engine: {max_model_len: 1024}",
      "engine: {max_model_len: 1024, long_prefill_token_threshold: 2048}"),
     "engine.long_prefill_token_threshold", "above max_model_len 1024"),
    (("engine: {max_model_len: 1024}",
      "engine: {max_model_len: 1024, long_prefill_token_threshold: 64, "
      "enable_chunked_prefill: false}"),
     "engine.long_prefill_token_threshold", "no effect with chunked prefill off"),
    (("engine: {max_model_len: 1024}",
      "engine: {max_model_len: 1024, max_output_tokens: 1024}"),
     "engine.max_output_tokens", "not below max_model_len"),
])
def test_mix_rules_report_file_line_and_fix(tmp_path, change, where, words):
    path = tmp_path / "bad.yaml"
    path.write_text(RECIPE.replace(*change))
    with pytest.raises(RecipeError) as caught:
        load_recipe(path)
    text = caught.value.format()
    assert where in text and words in text, text
    assert f"{path}:" in text
    assert caught.value.exit_code == 2


def test_mix_and_dataset_exclude_each_other(tmp_path):
    path = tmp_path / "both.yaml"
    path.write_text(RECIPE.replace("\nslo:", "\n  dataset: {path: p.jsonl}\nslo:"))
    with pytest.raises(RecipeError, match="exclude each other"):
        load_recipe(path)


def test_class_slos_need_classes(tmp_path):
    text = RECIPE.split("workload:")[0] + textwrap.dedent("""\
        slo:
          classes:
            short: {ttft_p99_ms: 300}
        """)
    path = tmp_path / "noclass.yaml"
    path.write_text(text)
    with pytest.raises(RecipeError, match="slo.classes needs request classes"):
        load_recipe(path)


def test_objective_class_must_name_a_class(tmp_path):
    path = tmp_path / "obj.yaml"
    path.write_text(RECIPE + "sweep: {objective_class: shrot}\n")
    with pytest.raises(RecipeError, match=r"sweep.objective_class: no class 'shrot'"):
        load_recipe(path)
    path.write_text(RECIPE + "sweep: {objective_class: short}\ntune: {objective_class: long}\n")
    loaded = load_recipe(path)
    from model_optimizer.search.sweep.flags import sweep_objective

    assert sweep_objective(loaded.resolved) == "short:goodput_qps"   # the recipe sets SLOs
