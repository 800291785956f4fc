"""Mixture-of-experts reads, MLA and sliding-window KV as vLLM allocates it, Mamba state,
checkpoint quantization and its kernels, unknown architectures, the parameter-count cache.
Figures are worked by hand in the comments."""

from __future__ import annotations

import json

import pytest

from model_optimizer.plan import ModelShape, estimate, load_model_config
from model_optimizer.plan.architecture import attention_of
from model_optimizer.plan.checkpoint_quant import checkpoint_quant, kernel_verdict
from model_optimizer.plan.moe import MoE
from model_optimizer.plan.param_count import _cache_file, _cache_key, count_parameters

from .conftest import DATA

CONFIGS = DATA / "configs"


def _config(name: str) -> dict:
    return load_model_config(CONFIGS / f"{name}.json")


# --- mixture of experts --------------------------------------------------------------------

def test_expected_distinct_experts_under_uniform_routing():
    moe = MoE(experts=8, top_k=2)
    assert moe.distinct(1) == pytest.approx(2)  # k at batch 1
    assert moe.distinct(2) == pytest.approx(8 * (1 - 0.75 ** 2))  # 3.5
    assert moe.distinct(64) == pytest.approx(8, rel=1e-6)  # all of them


def test_mixtral_decode_floor_reads_the_active_experts_at_batch_1(make_recipe):
    report = estimate(make_recipe({"hardware.accelerator": "H200"}), _config("mixtral-8x7b"))
    # experts 45,097,156,608 params x 2 bytes; the rest 1,605,636,096 x 2 bytes
    experts, rest = 45_097_156_608 * 2, (46_702_792_704 - 45_097_156_608) * 2
    assert report.expert_bytes_per_device == experts
    kv = 640 * 131_072  # one 512 + 128 token sequence, every layer full
    batch1 = report.decode_floors[0]
    assert batch1.tpot_floor_ms == pytest.approx((rest + experts * 2 / 8 + kv) / 4800e9 * 1e3)
    # at the planner's batch the step reads (nearly) every expert
    big = report.decode_floors[1]
    assert big.tpot_floor_ms > 3 * batch1.tpot_floor_ms
    assert report.moe == "8 routed experts, top-2 per token"


def test_deepseek_shared_experts_are_always_read(make_recipe):
    shape = ModelShape.from_config(_config("deepseek-v2-lite"))
    assert (shape.moe.experts, shape.moe.top_k, shape.moe.shared) == (64, 6, 2)
    assert shape.breakdown.shared_expert > 0
    assert shape.expert_params == shape.breakdown.expert  # shared not among the routed


def test_tensor_parallel_splits_experts_per_device(make_recipe):
    one = estimate(make_recipe({"hardware.accelerator": "H200"}), _config("qwen3-30b-a3b"))
    two = estimate(make_recipe({"hardware.accelerator": "H200", "hardware.count": 2,
                                "engine.tensor_parallel_size": 2}), _config("qwen3-30b-a3b"))
    assert two.expert_bytes_per_device == one.expert_bytes_per_device // 2
    # 4 KV heads over 2 ranks: 2 per device
    assert two.kv_bytes_per_token_per_device == one.kv_bytes_per_token // 2
    assert any("slices each of the 128 experts 2 ways" in n for n in two.notes)
    ep = estimate(make_recipe({"hardware.accelerator": "H200", "hardware.count": 2,
                               "engine.tensor_parallel_size": 2,
                               "engine.extra_args": {"enable-expert-parallel": True}}),
                  _config("qwen3-30b-a3b"))
    assert ep.expert_bytes_per_device == two.expert_bytes_per_device  # same bytes, whole
    assert any("64 whole experts per device of 128" in n for n in ep.notes)


# --- MLA -----------------------------------------------------------------------------------

def test_mla_latent_is_the_same_on_every_tp_rank(make_recipe):
    report = estimate(make_recipe({"hardware.accelerator": "H200", "hardware.count": 2,
                                   "engine.tensor_parallel_size": 2}),
                      _config("deepseek-v2-lite"))
    assert report.kv_bytes_per_token_per_device == 27 * (512 + 64) * 2  # 31,104, not halved


def test_fp8_ds_mla_stores_656_bytes_per_token_and_layer(make_recipe):
    report = estimate(make_recipe({"hardware.accelerator": "H200",
                                   "engine.kv_cache_dtype": "fp8_ds_mla"}),
                      _config("deepseek-v2-lite"))
    assert report.kv_bytes_per_token == 27 * 656  # 17,712
    assert not any("fp8_ds_mla" in p for p in report.problems)


def test_fp8_ds_mla_on_a_model_without_mla_is_a_problem(make_recipe):
    report = estimate(make_recipe({"hardware.accelerator": "H200",
                                   "engine.kv_cache_dtype": "fp8_ds_mla"}),
                      _config("llama-3.1-8b"))
    assert not report.fits
    assert any("fp8_ds_mla is for MLA models" in p for p in report.problems)


# --- sliding windows and Mamba -------------------------------------------------------------

def test_gemma3_windows_all_but_every_sixth_layer():
    layout = ModelShape.from_config(_config("gemma-3-1b")).layout
    assert layout.full_layers == 4  # layers 5, 11, 17, 23
    assert layout.windows == ((512, 22),)


def test_gpt_oss_layer_types_and_sinks():
    layout = ModelShape.from_config(_config("gpt-oss-20b")).layout
    assert (layout.full_layers, layout.windows, layout.sinks) == (12, ((128, 12),), True)


def test_qwen2_use_sliding_window_false_keeps_full_attention():
    config = load_model_config(DATA / "qwen2.5-0.5b")
    assert config.get("sliding_window") and config.get("use_sliding_window") is False
    layout = ModelShape.from_config(config).layout
    assert (layout.full_layers, layout.windows) == (24, ())


def _long_request(make_recipe, name: str, **extra) -> int:
    recipe = make_recipe({"hardware.accelerator": "H200", "engine.max_model_len": 32768,
                          **extra})
    return estimate(recipe, _config(name)).request_bytes_max_model_len


def test_windowed_layers_hold_the_window_plus_one_prefill_chunk(make_recipe):
    # Mistral: 32 layers x 4096 bytes per token; min(4095 + 2048, 32768) = 6143 tokens
    # -> 384 blocks of 16, + 1 block where the window cuts = 385 blocks = 6160 tokens
    assert _long_request(make_recipe, "mistral-7b-v0.1") == 32 * 6160 * 4096
    # a bigger prefill chunk keeps more
    assert _long_request(make_recipe, "mistral-7b-v0.1", **{
        "engine.max_num_batched_tokens": 8192}) == 32 * 12304 * 4096


def test_disabling_the_hybrid_manager_allocates_mixed_windows_in_full(make_recipe):
    # Gemma 2: 21 full + 21 windowed layers x 8192 bytes per token, max_model_len 8192
    hybrid = _long_request(make_recipe, "gemma-2-9b", **{"engine.max_model_len": 8192})
    assert hybrid == 21 * 8192 * 8192 + 21 * 6160 * 8192
    off = _long_request(make_recipe, "gemma-2-9b", **{
        "engine.max_model_len": 8192,
        "engine.extra_args": {"disable-hybrid-kv-cache-manager": True}})
    assert off == 42 * 8192 * 8192


def test_jamba_mamba_state_is_constant_per_sequence(make_recipe):
    # 4 attention layers x 4096 bytes per token x 32768 + 28 x 311,296 bytes of state
    assert _long_request(make_recipe, "jamba-v0.1") == 4 * 4096 * 32768 + 28 * 311_296


def test_unknown_model_type_is_planned_with_a_stated_assumption(make_recipe):
    config = {**_config("llama-3.1-8b"), "model_type": "brand_new_arch"}
    report = estimate(make_recipe({"hardware.accelerator": "H200"}), config)
    assert any("'brand_new_arch' is not one the planner models" in w for w in report.warnings)
    assert any("transformers could not build" in n for n in report.notes)
    assert report.param_source.startswith("arithmetic")


def test_attention_of_reads_nemotron_h_patterns():
    config = {"model_type": "nemotron_h", "hybrid_override_pattern": "M-M*-M", "hidden_size": 64,
              "mamba_num_heads": 4, "mamba_head_dim": 16, "ssm_state_size": 8, "n_groups": 1,
              "conv_kernel": 4}
    layout = attention_of(config, 6, 2, 32)
    # 'M' Mamba, '*' attention, '-' MLP (no KV); conv (4 - 1) x (64 + 2 x 8) + 4 x 16 x 8
    assert (layout.full_layers, layout.state_layers) == (1, 3)
    assert layout.state_elements == 3 * 80 + 512


# --- quantized checkpoints -----------------------------------------------------------------

def test_gpt_oss_mxfp4_covers_the_experts_only():
    found = checkpoint_quant(_config("gpt-oss-20b"))
    assert (found.method, found.scheme, float(found.bits), found.experts_only) == (
        "mxfp4", "mxfp4", 4.25, True)


def test_compressed_tensors_groups_and_nvfp4():
    w4 = {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {
        "group_0": {"weights": {"num_bits": 4, "type": "int", "strategy": "group",
                                "group_size": 128, "symmetric": True}}}}}
    assert float(checkpoint_quant(w4).bits) == 4 + 16 / 128
    fp4 = {"quantization_config": {"quant_method": "compressed-tensors", "config_groups": {
        "group_0": {"weights": {"num_bits": 4, "type": "float", "strategy": "tensor_group",
                                "group_size": 16}}}}}
    nvfp4 = checkpoint_quant(fp4)
    assert (nvfp4.scheme, float(nvfp4.bits)) == ("nvfp4", 4.5)
    problem, _ = kernel_verdict(nvfp4, "cpu")
    assert "no kernel for nvfp4" in problem
    assert kernel_verdict(nvfp4, "B200") == (None, None)
    _, note = kernel_verdict(nvfp4, "H100")
    assert "weight-only (Marlin)" in note


def test_a_scheme_the_accelerator_cannot_run_is_a_problem(make_recipe):
    config = {**_config("llama-3.1-8b"), "quantization_config": {
        "quant_method": "modelopt", "quant_algo": "NVFP4"}}
    report = estimate(make_recipe({"hardware.accelerator": "MI300X"}), config)
    assert any("ROCm (MI300X) has no kernel for nvfp4" in p for p in report.problems)


def test_gpt_oss_weights_from_its_mxfp4_checkpoint(make_recipe):
    report = estimate(make_recipe({"hardware.accelerator": "A10"}), _config("gpt-oss-20b"))
    # experts 19,110,297,600 x 4.25 / 8 + the other 1,804,459,584 params x 2 bytes
    assert report.weight_bytes == 10_152_345_600 + 3_608_919_168
    assert any("runs weight-only (Marlin) on A10" in n for n in report.notes)


def test_recipe_method_other_than_the_checkpoints_is_a_problem(make_recipe):
    report = estimate(make_recipe({"hardware.accelerator": "H200",
                                   "model.quantization": "awq"}), _config("gpt-oss-20b"))
    assert any("the checkpoint is mxfp4" in p for p in report.problems)


# --- the parameter-count cache -------------------------------------------------------------

def test_counts_are_cached_on_disk(tmp_path, monkeypatch):
    monkeypatch.setenv("MOPT_CACHE_DIR", str(tmp_path))
    config = {**_config("phi-3-mini-4k"), "num_hidden_layers": 31}  # seen nowhere else
    first = count_parameters(config)
    file = _cache_file(_cache_key(config))
    assert file.parent == tmp_path / "param-counts"
    assert json.loads(file.read_text())["embedding"] == first.embedding
    count_parameters.__globals__["_counts_for"].cache_clear()
    again = count_parameters(config)
    assert (again.total, again.seconds) == (first.total, 0.0)


def test_a_config_transformers_cannot_build_falls_back_to_arithmetic():
    assert count_parameters({"model_type": "no_such_model", "hidden_size": 8}) is None
    assert count_parameters({"hidden_size": 8}) is None
