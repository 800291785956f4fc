"""Every kv_cache_dtype the schema accepts is planned; Qwen2 and Mistral configs plan too.

Figures are worked out by hand in the comments from vLLM 0.32's page layouts and the models'
published config.json files (tests/data).
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.plan import ModelShape, estimate, load_model_config
from model_optimizer.plan.kvcache import KV_DTYPES

from .conftest import DATA

# tiny Llama: 4 layers, 2 KV heads, head_dim 64, bf16
TINY_KV_BYTES = {
    "auto": 2 * 4 * 2 * 64 * 2,  # 2048
    "bfloat16": 2048,
    "float16": 2048,
    "fp8": 1024,
    "fp8_e4m3": 1024,
    "fp8_e5m2": 1024,
    "fp8_inc": 1024,
    "fp8_ds_mla": 1024,
    # per layer and KV head: 64 + 64 bytes of data + two fp32 scales = 136
    "fp8_per_token_head": 4 * 2 * 136,  # 1088
    "int8_per_token_head": 1088,
    # packed int4: 32 + 32 bytes + 8 bytes of scales = 72
    "int4_per_token_head": 4 * 2 * 72,  # 576
    # nvfp4: (64 / 2 + 64 / 16) = 36 bytes for K, 36 for V
    "nvfp4": 4 * 2 * 72,  # 576
}


def test_the_planner_knows_every_schema_kv_dtype(recipe_schema):
    accepted = recipe_schema["properties"]["engine"]["properties"]["kv_cache_dtype"]["enum"]
    assert sorted(accepted) == sorted(KV_DTYPES)
    assert sorted(TINY_KV_BYTES) == sorted(accepted)


@pytest.mark.parametrize("kv_dtype", sorted(TINY_KV_BYTES))
def test_kv_bytes_per_token_of_every_dtype(make_recipe, tiny_config, kv_dtype):
    recipe = make_recipe({"engine.kv_cache_dtype": kv_dtype, "hardware.accelerator": "H100"})
    report = estimate(recipe, tiny_config)
    assert report.kv_bytes_per_token == TINY_KV_BYTES[kv_dtype]


@pytest.mark.parametrize("kv_dtype", ["int8_per_token_head", "int4_per_token_head", "nvfp4",
                                      "bfloat16", "fp8_inc"])
def test_gpu_only_kv_dtypes_are_a_problem_on_cpu(make_recipe, tiny_config, kv_dtype):
    recipe = make_recipe({"engine.kv_cache_dtype": kv_dtype, "hardware.accelerator": "cpu",
                          "engine.block_size": 32})
    report = estimate(recipe, tiny_config)
    assert not report.fits
    assert any(f"kv_cache_dtype {kv_dtype} is GPU-only" in p for p in report.problems)


@pytest.mark.parametrize("kv_dtype", ["auto", "fp8", "fp8_e4m3", "fp8_e5m2"])
def test_cpu_kv_dtypes_fit_on_cpu(make_recipe, tiny_config, kv_dtype):
    recipe = make_recipe({"engine.kv_cache_dtype": kv_dtype, "hardware.accelerator": "cpu",
                          "engine.block_size": 32, "engine.env": {"VLLM_CPU_KVCACHE_SPACE": "1"}})
    assert estimate(recipe, tiny_config).fits


def test_gpu_kv_dtype_names_what_it_needs(make_recipe, tiny_config):
    recipe = make_recipe({"engine.kv_cache_dtype": "nvfp4", "hardware.accelerator": "H100"})
    report = estimate(recipe, tiny_config)
    assert any("Blackwell" in note for note in report.notes)


@pytest.mark.parametrize("kv_dtype", ["int8_per_token_head", "int4_per_token_head", "nvfp4"])
def test_plan_cli_does_not_crash_on_quantized_kv_dtypes(repo_root, kv_dtype):
    result = CliRunner().invoke(app, ["plan", str(repo_root / "recipes" / "7b-int4-a10.yaml"),
                              "--model-config", str(repo_root / "examples/llama-2-7b-config.json"),
                              "--set", f"engine.kv_cache_dtype={kv_dtype}", "--json"])
    assert result.exit_code in (0, 1), result.output
    data = json.loads(result.output)
    # Llama-2-7B: 32 layers * 32 KV heads * (K+V bytes of one head)
    head = {"int8_per_token_head": 2 * 128 + 8, "int4_per_token_head": 128 + 8,
            "nvfp4": 2 * (64 + 8)}[kv_dtype]
    assert data["kv_bytes_per_token"] == 32 * 32 * head


# --- other architectures ---------------------------------------------------------------------


def test_qwen2_shape_counts_qkv_biases_and_tied_embeddings():
    shape = ModelShape.from_config(load_model_config(DATA / "qwen2.5-0.5b"))
    # head_dim 896 / 14 = 64; KV out 2 * 64 = 128
    # linear per layer: 896 * (2 * 896 + 2 * 128) + 3 * 896 * 4864 = 14,909,440; * 24
    assert shape.linear_params == 357_826_560
    assert shape.embedding_params == 151_936 * 896  # tied: one table
    # q/k/v biases 24 * (14 + 2 * 2) * 64 = 27,648 and norms (2 * 24 + 1) * 896 = 43,904
    # stay in the dtype
    assert shape.norm_params == 27_648 + 43_904
    # the published parameter count of Qwen2.5-0.5B
    assert shape.param_count == 494_032_768


def test_qwen2_plan_on_an_a10(make_recipe):
    recipe = make_recipe({"hardware.accelerator": "A10", "engine.max_model_len": 4096})
    report = estimate(recipe, load_model_config(DATA / "qwen2.5-0.5b"))
    # bf16 KV: 2 * 24 layers * 2 KV heads * 64 * 2 bytes = 12,288 bytes per token
    assert report.kv_bytes_per_token == 12_288
    assert report.weight_bytes == 494_032_768 * 2
    assert report.fits


def test_mistral_shape_and_plan(make_recipe):
    config = load_model_config(DATA / "mistral-7b")
    shape = ModelShape.from_config(config)
    assert shape.bias_params == 0
    # the published parameter count of Mistral-7B-v0.1
    assert shape.param_count == 7_241_732_096
    fp8 = make_recipe({"hardware.accelerator": "A10", "engine.kv_cache_dtype": "fp8",
                       "engine.max_model_len": 8192})
    report = estimate(fp8, config)
    # 2 * 32 layers * 8 KV heads * 128 * 1 byte
    assert report.kv_bytes_per_token == 65_536
    assert report.fits
