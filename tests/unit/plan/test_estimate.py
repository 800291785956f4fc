"""Tests of the plan arithmetic against figures worked out by hand in the comments.

Constants used below:
  A10  memory = 23028 MiB = 24,146,608,128 bytes, bandwidth 600 GB/s
  L4   memory = 23034 MiB = 24,152,899,584 bytes, bandwidth 300 GB/s
  reserve     = 1 GiB     =  1,073,741,824 bytes per GPU
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model_optimizer.errors import UsageError
from model_optimizer.plan import (
    ModelShape,
    PlanError,
    estimate,
    fits,
    kv_bytes_per_token,
    load_model_config,
)

A10_BYTES = 23028 * 2**20
L4_BYTES = 23034 * 2**20
RESERVE = 2**30

# Llama-2-7B: hidden 4096, intermediate 11008, 32 layers, 32 heads = 32 KV heads, vocab 32000
#   per layer q,k,v,o  4 * 4096 * 4096       =    67,108,864
#   per layer MLP      3 * 4096 * 11008      =   135,266,304
#   linear, 32 layers  32 * 202,375,168      = 6,476,005,376
#   embed + lm_head    2 * 32000 * 4096      =   262,144,000
#   norms              (2 * 32 + 1) * 4096   =       266,240
LLAMA2_LINEAR = 6_476_005_376
LLAMA2_REST = 262_144_000 + 266_240
LLAMA2_PARAMS = 6_738_415_616
# GPTQ: 4 bits + (fp16 scale + 4-bit zero) / 128 = 4.15625 bits = 133/256 bytes per weight
#   linear 6,476,005,376 * 133 / 256 = 3,364,487,168; the rest fp16: 262,410,240 * 2
LLAMA2_GPTQ_BYTES = 3_364_487_168 + 524_820_480  # = 3,889,307,648

# Llama-3-8B: hidden 4096, intermediate 14336, 32 layers, 32 heads, 8 KV heads, vocab 128256
#   per layer q + o    2 * 4096 * 4096       =    33,554,432
#   per layer k + v    2 * 4096 * 1024       =     8,388,608
#   per layer MLP      3 * 4096 * 14336      =   176,160,768
#   linear, 32 layers  32 * 218,103,808      = 6,979,321,856
#   embed + lm_head    2 * 128256 * 4096     = 1,050,673,152
#   norms              65 * 4096             =       266,240
LLAMA3_LINEAR = 6_979_321_856
LLAMA3_PARAMS = 8_030_261_248


def a10_gptq(make_recipe, **extra):
    """The 7b-int4-a10 recipe's engine and workload, with a max_model_len the model allows."""
    overrides = {
        "model.quantization": "gptq",
        "model.dtype": "float16",
        "engine.kv_cache_dtype": "fp8",
        "engine.block_size": 32,
        "engine.max_model_len": 4096,
        "engine.max_num_seqs": 24,
        "engine.gpu_memory_utilization": 0.90,
        "hardware.accelerator": "A10",
        "workload.prompt_tokens": 512,
        "workload.output_tokens": 128,
    }
    return make_recipe({**overrides, **extra})


# --- model shape ---------------------------------------------------------------------------


def test_llama2_shape_and_param_count(llama2_config):
    shape = ModelShape.from_config(llama2_config)
    assert (shape.num_layers, shape.num_kv_heads, shape.head_dim) == (32, 32, 128)
    assert shape.linear_params == LLAMA2_LINEAR
    assert shape.embedding_params + shape.norm_params == LLAMA2_REST
    assert shape.param_count == LLAMA2_PARAMS
    assert (shape.torch_dtype, shape.max_position_embeddings) == ("float16", 4096)


def test_llama3_param_count_with_grouped_query_attention(llama3_config):
    shape = ModelShape.from_config(llama3_config)
    assert (shape.num_kv_heads, shape.head_dim, shape.vocab_size) == (8, 128, 128256)
    assert shape.linear_params == LLAMA3_LINEAR
    assert shape.param_count == LLAMA3_PARAMS


def test_missing_kv_heads_means_multi_head_attention(llama3_config):
    config = {k: v for k, v in llama3_config.items() if k != "num_key_value_heads"}
    assert ModelShape.from_config(config).num_kv_heads == 32


def test_tied_embeddings_drop_the_lm_head(llama2_config):
    shape = ModelShape.from_config({**llama2_config, "tie_word_embeddings": True})
    assert shape.param_count == LLAMA2_PARAMS - 32000 * 4096


def test_explicit_head_dim_wins(llama2_config):
    # 32 heads * 64 = 2048 != hidden: q,o = 2 * 4096 * 2048, k,v the same (MHA)
    shape = ModelShape.from_config({**llama2_config, "head_dim": 64})
    assert shape.head_dim == 64
    assert shape.linear_params == 32 * (4 * 4096 * 2048 + 3 * 4096 * 11008)


def test_dtype_key_is_read_when_torch_dtype_is_absent(llama3_config):
    config = {k: v for k, v in llama3_config.items() if k != "torch_dtype"}
    assert ModelShape.from_config({**config, "dtype": "bfloat16"}).torch_dtype == "bfloat16"


# --- load_model_config ---------------------------------------------------------------------


def test_load_accepts_file_or_folder(llama2_config, repo_root):
    assert load_model_config(repo_root / "tests" / "data" / "llama-2-7b") == llama2_config
    examples = repo_root / "examples" / "llama-2-7b-config.json"
    assert load_model_config(examples) == llama2_config


def test_load_missing_file_names_it(tmp_path):
    with pytest.raises(PlanError, match=r"config\.json: no such file"):
        load_model_config(tmp_path)


def test_load_invalid_json_gives_file_line_and_column(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text('{\n  "hidden_size": 4096,\n  oops\n}')
    with pytest.raises(PlanError) as info:
        load_model_config(bad)
    assert str(info.value).startswith(f"{bad}:3:3: invalid JSON")


def test_load_lists_every_missing_field(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({"hidden_size": 4096, "num_hidden_layers": 32}))
    with pytest.raises(PlanError) as info:
        load_model_config(bad)
    message = str(info.value)
    assert message.startswith(str(bad))
    for name in ("num_attention_heads", "vocab_size", "intermediate_size"):
        assert name in message
    assert "hidden_size" not in message


@pytest.mark.parametrize(
    ("patch", "fragment"),
    [
        ({"hidden_size": "4096"}, "hidden_size must be a positive integer"),
        ({"num_hidden_layers": 0}, "num_hidden_layers is 0, outside 1.."),
        ({"vocab_size": True}, "vocab_size must be a positive integer"),
        ({"hidden_size": 4100}, "not a multiple of num_attention_heads"),
    ],
)
def test_load_rejects_unusable_values(tmp_path, llama2_config, patch, fragment):
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({**llama2_config, **patch}))
    with pytest.raises(PlanError, match=fragment):
        load_model_config(bad)


def test_load_rejects_a_json_array(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("[1, 2]")
    with pytest.raises(PlanError, match="expected a JSON object, got list"):
        load_model_config(bad)


def test_plan_error_is_a_value_error_and_a_usage_error():
    assert issubclass(PlanError, ValueError)
    assert issubclass(PlanError, UsageError)


# --- KV bytes per token --------------------------------------------------------------------


def test_kv_bytes_per_token_by_model_and_dtype(make_recipe, llama2_config, llama3_config):
    # Llama-2-7B fp16: 2 * 32 layers * 32 KV heads * 128 * 2 bytes = 524,288
    assert estimate(make_recipe(), llama2_config).kv_bytes_per_token == 524_288
    # Llama-3-8B bf16: 2 * 32 * 8 * 128 * 2 = 131,072; fp8: 65,536
    assert estimate(make_recipe(), llama3_config).kv_bytes_per_token == 131_072
    fp8 = make_recipe({"engine.kv_cache_dtype": "fp8_e5m2"})
    assert estimate(fp8, llama3_config).kv_bytes_per_token == 65_536
    # an explicit float32 model doubles the auto KV cache: 2 * 32 * 8 * 128 * 4
    fp32 = make_recipe({"model.dtype": "float32"})
    assert estimate(fp32, llama3_config).kv_bytes_per_token == 262_144


def test_kv_heads_split_over_tensor_parallel_ranks(llama3_config):
    shape = ModelShape.from_config(llama3_config)
    assert kv_bytes_per_token(shape, 2, 2) == 2 * 32 * 4 * 128 * 2  # 65,536
    # 16 ranks > 8 KV heads: vLLM replicates, one head per rank
    assert kv_bytes_per_token(shape, 2, 16) == 2 * 32 * 1 * 128 * 2  # 16,384


# --- the A10 + GPTQ recipe -----------------------------------------------------------------


def test_a10_gptq_memory_figures(make_recipe, llama2_config):
    report = estimate(a10_gptq(make_recipe), llama2_config)
    assert report.param_count == LLAMA2_PARAMS
    assert (report.weight_bits, report.linear_bits_effective) == (4.0, 4.15625)
    assert report.weight_bytes == report.weight_bytes_per_device == LLAMA2_GPTQ_BYTES
    # fp8 KV: 2 * 32 * 32 * 128 * 1 = 262,144 bytes per token
    assert report.kv_bytes_per_token_per_device == 262_144
    # int(24,146,608,128 * 0.9) = 21,731,947,315
    #   - 3,889,307,648 weights - 1,073,741,824 reserve = 16,768,897,843
    assert report.reserve_bytes_per_device == RESERVE
    assert report.kv_budget_bytes == 16_768_897_843
    # a block of 32 tokens = 8,388,608 bytes; 16,768,897,843 // 8,388,608 = 1999 blocks
    assert (report.block_size, report.kv_blocks, report.kv_tokens) == (32, 1999, 63_968)


def test_a10_gptq_sequences_and_verdict(make_recipe, llama2_config):
    report = estimate(a10_gptq(make_recipe), llama2_config)
    # 512 + 128 = 640 tokens = 20 blocks of 32; 1999 // 20 = 99 sequences
    assert (report.seq_len, report.blocks_per_seq) == (640, 20)
    assert report.max_seqs_no_preemption == 99
    assert (report.max_model_len, report.fits_max_model_len) == (4096, True)
    assert (report.recipe_max_num_seqs, report.recipe_max_num_seqs_is_default) == (24, False)
    assert report.problems == [] and report.warnings == []
    assert report.verdict == "fits" and report.fits
    assert fits(a10_gptq(make_recipe), llama2_config) == (True, "fits")


def test_a10_gptq_decode_floors(make_recipe, llama2_config):
    floors = estimate(a10_gptq(make_recipe), llama2_config).decode_floors
    assert [(f.label, f.batch) for f in floors] == [
        ("batch 1", 1),
        ("planner max (no preemption)", 99),
        ("max_num_seqs (recipe)", 24),
    ]
    seq_kv = 640 * 262_144  # 167,772,160 bytes per full-length sequence
    # batch 1: (3,889,307,648 + 167,772,160) / 600e9 s = 6.76179968 ms
    assert floors[0].tpot_floor_ms == pytest.approx(6.76179968)
    assert floors[0].tokens_per_s_ceiling == pytest.approx(1000 / 6.76179968)
    # batch 24: (3,889,307,648 + 24 * 167,772,160) / 600e9 = 13.19306581 ms, 1819 tok/s
    assert floors[2].tpot_floor_ms == pytest.approx(13.193065813)
    assert floors[2].tokens_per_s_ceiling == pytest.approx(24 / 0.013193065813)
    # batch 99: (3,889,307,648 + 99 * seq_kv) / 600e9
    assert floors[1].tpot_floor_ms == pytest.approx((LLAMA2_GPTQ_BYTES + 99 * seq_kv) / 600e6)


def test_max_model_len_past_the_position_limit_stops_vllm(make_recipe, llama2_config):
    # the shipped 7b-int4-a10 recipe asks 8192 of a model trained for 4096 positions
    recipe = a10_gptq(make_recipe, **{"engine.max_model_len": 8192})
    report = estimate(recipe, llama2_config)
    assert report.fits_max_model_len is True  # 8192 tokens fit in the 63,968-token cache
    assert report.problems == [
        "max_model_len 8192 exceeds the model's max_position_embeddings 4096: "
        "vLLM refuses to start (lower it to 4096)"
    ]
    assert fits(recipe, llama2_config)[0] is False


def test_allow_long_max_model_len_turns_the_problem_into_a_warning(make_recipe, llama2_config):
    recipe = a10_gptq(
        make_recipe,
        **{"engine.max_model_len": 8192, "engine.env": {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}},
    )
    report = estimate(recipe, llama2_config)
    assert report.problems == []
    assert "VLLM_ALLOW_LONG_MAX_MODEL_LEN" in report.warnings[0]


# --- what does not fit ---------------------------------------------------------------------


def test_7b_fp16_on_a10_fits(make_recipe, llama2_config):
    # 13,476,831,232 bytes of fp16 weights (12.55 GiB) do fit in 22.49 GiB:
    # int(24,146,608,128 * 0.9) - 13,476,831,232 - 1,073,741,824 = 7,181,374,259
    # blocks of 16 * 524,288 = 8,388,608 bytes: 856 blocks = 13,696 tokens
    report = estimate(make_recipe({"hardware.accelerator": "A10"}), llama2_config)
    assert report.weight_bytes == LLAMA2_PARAMS * 2
    assert report.kv_budget_bytes == 7_181_374_259
    assert (report.kv_blocks, report.kv_tokens) == (856, 13_696)
    assert report.fits


def test_7b_fp32_weights_exceed_an_a10(make_recipe, llama2_config):
    # 6,738,415,616 * 4 = 26,953,662,464 bytes = 25.10 GiB > 22.49 GiB
    recipe = make_recipe({"hardware.accelerator": "A10", "model.dtype": "float32"})
    report = estimate(recipe, llama2_config)
    assert report.weight_bytes == 26_953_662_464
    assert report.kv_budget_bytes < 0 and report.kv_tokens == 0
    assert len(report.problems) == 1
    assert report.problems[0].startswith(
        "weights alone take 25.10 GiB per device, more than the 22.49 GiB of A10"
    )
    assert report.verdict == "does not fit"
    ok, reason = fits(recipe, llama2_config)
    assert not ok and "weights alone" in reason


def test_no_room_left_for_kv_cache(make_recipe, llama3_config):
    # Llama-3-8B bf16: 16,060,522,496 bytes; int(24,146,608,128 * 0.7) = 16,902,625,689
    # 16,902,625,689 - 16,060,522,496 - 1,073,741,824 = -231,638,631: nothing for KV
    recipe = make_recipe({"hardware.accelerator": "A10", "engine.gpu_memory_utilization": 0.7})
    report = estimate(recipe, llama3_config)
    assert report.kv_budget_bytes == -231_638_631
    assert report.kv_blocks == 0 and report.max_seqs_no_preemption == 0
    assert report.problems[0].startswith("no memory left for the KV cache (-0.22 GiB")
    assert [f.batch for f in report.decode_floors] == [1, 256]  # no planner maximum


def test_max_model_len_larger_than_the_kv_cache(make_recipe, llama2_config):
    # fp16 on A10 at 0.65: int(24,146,608,128 * 0.65) = 15,695,295,283
    #   - 13,476,831,232 - 1,073,741,824 = 1,144,722,227 -> 136 blocks of 16 = 2176 tokens
    # max_model_len null -> the model's 4096 positions: ceil(4096 / 16) = 256 blocks > 136
    recipe = make_recipe({"hardware.accelerator": "A10", "engine.gpu_memory_utilization": 0.65})
    report = estimate(recipe, llama2_config)
    assert report.kv_budget_bytes == 1_144_722_227
    assert report.kv_tokens == 2176
    assert (report.max_model_len, report.fits_max_model_len) == (4096, False)
    # 4096 tokens * 524,288 bytes = 2.00 GiB
    assert report.problems == [
        "max_model_len 4096 needs 2.00 GiB of KV cache but only 2176 tokens fit: vLLM will "
        "refuse to start. Set max_model_len <= 2176, or use an fp8 KV cache, or free memory"
    ]
    ok, reason = fits(recipe, llama2_config)
    assert (ok, reason) == (False, report.problems[0])


def test_recipe_max_num_seqs_beyond_the_cache_warns(make_recipe, llama2_config):
    recipe = a10_gptq(make_recipe, **{"engine.max_num_seqs": 128})
    report = estimate(recipe, llama2_config)
    assert report.fits and report.verdict == "fits with warnings"
    assert report.warnings == [
        "the KV cache holds 99 sequences of 640 tokens; the recipe's max_num_seqs 128 "
        "will preempt under full load"
    ]


def test_a_search_asks_fits_without_preemption(make_recipe, llama2_config):
    """The one planner check before a search launches: beyond the KV cache is a no."""
    recipe = a10_gptq(make_recipe, **{"engine.max_num_seqs": 128})
    assert fits(recipe, llama2_config) == (True, "fits")  # starts, but would preempt
    ok, reason = fits(recipe, llama2_config, without_preemption=True)
    assert not ok and "at most 99 sequences of 640 tokens" in reason
    assert "fewer than max_num_seqs=128" in reason
    within = a10_gptq(make_recipe, **{"engine.max_num_seqs": 64})
    assert fits(within, llama2_config, without_preemption=True) == (True, "fits")
    unset = make_recipe({"hardware.accelerator": "H100"})  # vLLM's default is not asked
    assert fits(unset, llama2_config, without_preemption=True) == fits(unset, llama2_config)


def test_vllm_default_max_num_seqs_is_planned_when_unset(make_recipe, llama3_config):
    # H100 default 1024; Llama-3-8B bf16 leaves room for far fewer 640-token sequences
    report = estimate(make_recipe({"hardware.accelerator": "H100"}), llama3_config)
    assert (report.recipe_max_num_seqs, report.recipe_max_num_seqs_is_default) == (1024, True)
    assert report.decode_floors[-1].label == "max_num_seqs (vLLM default)"
    assert "vLLM's default max_num_seqs 1024" in report.warnings[0]


def test_workload_longer_than_max_model_len_warns(make_recipe, llama2_config):
    recipe = a10_gptq(make_recipe, **{"engine.max_model_len": 512})
    report = estimate(recipe, llama2_config)
    assert report.fits
    assert report.warnings == [
        "workload prompt + output = 640 tokens exceeds max_model_len "
        "512: vLLM rejects every request"
    ]


# --- block rounding ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "output", "block", "blocks_per_seq", "max_seqs"),
    [
        (500, 128, 32, 20, 1999 // 20),  # 628 tokens -> 20 blocks of 32 (640 tokens)
        (513, 128, 32, 21, 1999 // 21),  # 641 tokens -> 21 blocks: one token costs a block
        (512, 128, 16, 40, 3998 // 40),  # 16-token blocks: 16,768,897,843 // 4,194,304 = 3998
    ],
)
def test_sequences_round_up_to_whole_blocks(
    make_recipe, llama2_config, prompt, output, block, blocks_per_seq, max_seqs
):
    recipe = a10_gptq(
        make_recipe,
        **{
            "workload.prompt_tokens": prompt,
            "workload.output_tokens": output,
            "engine.block_size": block,
        },
    )
    report = estimate(recipe, llama2_config)
    assert report.blocks_per_seq == blocks_per_seq
    assert report.max_seqs_no_preemption == max_seqs
    assert report.kv_tokens % block == 0


def test_gpu_block_size_defaults_to_16(make_recipe, llama2_config):
    report = estimate(a10_gptq(make_recipe, **{"engine.block_size": None}), llama2_config)
    # 16,768,897,843 // (16 * 262,144) = 3998 blocks
    assert (report.block_size, report.kv_blocks, report.kv_tokens) == (16, 3998, 63_968)


@settings(max_examples=60, deadline=None)
@given(
    utilization=st.floats(min_value=0.3, max_value=1.0),
    block=st.sampled_from([1, 8, 16, 32, 64, 128]),
    prompt=st.integers(min_value=1, max_value=8000),
    output=st.integers(min_value=1, max_value=2000),
)
def test_kv_cache_is_whole_blocks_within_budget(utilization, block, prompt, output):
    recipe = {
        "model": {"quantization": "gptq", "dtype": "float16"},
        "engine": {
            "gpu_memory_utilization": utilization,
            "block_size": block,
            "kv_cache_dtype": "auto",
            "max_model_len": None,
        },
        "hardware": {"accelerator": "A10"},
        "workload": {"prompt_tokens": prompt, "output_tokens": output},
    }
    config = {
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "vocab_size": 32000,
        "torch_dtype": "float16",
    }
    report = estimate(recipe, config)
    block_bytes = block * report.kv_bytes_per_token_per_device
    assert report.kv_tokens == report.kv_blocks * block
    assert report.kv_blocks * block_bytes <= max(report.kv_budget_bytes, 0)
    assert max(report.kv_budget_bytes, 0) < (report.kv_blocks + 1) * block_bytes
    assert report.blocks_per_seq == math.ceil((prompt + output) / block)
    assert report.max_seqs_no_preemption * report.blocks_per_seq <= report.kv_blocks


# --- tensor parallelism --------------------------------------------------------------------


def test_tensor_parallel_splits_weights_and_kv_heads(make_recipe, llama3_config):
    recipe = make_recipe(
        {"hardware.accelerator": "L4", "hardware.count": 2, "engine.tensor_parallel_size": 2}
    )
    report = estimate(recipe, llama3_config)
    # 16,060,522,496 bytes of bf16 weights / 2 = 8,030,261,248 per device
    assert report.weight_bytes == 16_060_522_496
    assert report.weight_bytes_per_device == 8_030_261_248
    # 8 KV heads / 2 = 4 per device: 2 * 32 * 4 * 128 * 2 = 65,536 bytes per token
    assert (report.kv_bytes_per_token, report.kv_bytes_per_token_per_device) == (131_072, 65_536)
    # int(24,152,899,584 * 0.9) = 21,737,609,625 - 8,030,261,248 - 1,073,741,824
    assert report.kv_budget_bytes == 12_633_606_553
    # blocks of 16 * 65,536 = 1,048,576 bytes: 12,048 blocks = 192,768 tokens per device
    assert (report.kv_blocks, report.kv_tokens) == (12_048, 192_768)
    # batch 1: (8,030,261,248 + 640 * 65,536) / 300e9 s = 26.90734763 ms
    assert report.decode_floors[0].tpot_floor_ms == pytest.approx(26.907347627)
    assert report.fits


def test_tensor_parallel_beyond_the_device_count(make_recipe, llama3_config):
    recipe = make_recipe({"hardware.accelerator": "L4", "engine.tensor_parallel_size": 2})
    report = estimate(recipe, llama3_config)
    assert "tensor_parallel_size 2 exceeds hardware.count 1" in report.problems


def test_tensor_parallel_must_divide_the_heads(make_recipe, llama3_config):
    recipe = make_recipe({"hardware.count": 3, "engine.tensor_parallel_size": 3})
    report = estimate(recipe, llama3_config)
    assert report.problems == ["num_attention_heads 32 is not divisible by tensor_parallel_size 3"]


# --- quantization rules --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quantization", "weight_bits", "nominal", "effective"),
    [
        ("awq", None, 4, 4.15625),  # 4 + 20 / 128
        ("gptq_marlin", None, 4, 4.15625),
        ("gptq", 3, 3, 3.15625),  # weight_bits replaces the 4; the group overhead stays
        ("fp8", None, 8, 8),
        ("mxfp4", None, 4, 4.25),  # 4 + 8 / 32
        ("modelopt_fp4", None, 4, 4.5),  # 4 + 8 / 16
        ("bitsandbytes", None, 4, 4.5),  # 4 + 32 / 64
        ("none", None, 16, 16),
        ("none", 8, 8, 8),
    ],
)
def test_linear_bits_by_method(
    make_recipe, llama3_config, quantization, weight_bits, nominal, effective
):
    recipe = make_recipe({"model.quantization": quantization, "model.weight_bits": weight_bits})
    report = estimate(recipe, llama3_config)
    assert (report.weight_bits, report.linear_bits_effective) == (nominal, effective)
    # embeddings, lm_head and norms stay bf16: (1,050,673,152 + 266,240) * 2 bytes
    expected = math.ceil(LLAMA3_LINEAR * effective / 8) + 2_101_878_784
    assert report.weight_bytes == expected


def test_fp8_llama3_weight_bytes(make_recipe, llama3_config):
    # 6,979,321,856 linear weights at 1 byte + 2,101,878,784 bytes of bf16 rest
    report = estimate(make_recipe({"model.quantization": "fp8"}), llama3_config)
    assert report.weight_bytes == 9_081_200_640


def test_checkpoint_defined_methods_fall_back_to_the_dtype_with_a_note(make_recipe, llama3_config):
    report = estimate(make_recipe({"model.quantization": "gguf"}), llama3_config)
    assert report.weight_bits == 16
    assert report.weight_bytes == LLAMA3_PARAMS * 2
    assert any("set model.weight_bits" in note for note in report.notes)


def test_float32_checkpoint_under_auto_is_planned_at_16_bits(make_recipe, llama2_config):
    report = estimate(make_recipe(), {**llama2_config, "torch_dtype": "float32"})
    assert report.dtype == "float16"
    assert report.weight_bytes == LLAMA2_PARAMS * 2
    assert any("'float32'" in note for note in report.notes)


# --- the CPU engine ------------------------------------------------------------------------


def tiny_cpu(make_recipe, **extra):
    """The tiny-cpu recipe: 2 GiB machine share, 1 GiB of KV space, blocks of 32."""
    overrides = {
        "model.dtype": "bfloat16",
        "engine.block_size": 32,
        "engine.max_model_len": 512,
        "engine.max_num_seqs": 8,
        "engine.env": {"VLLM_CPU_KVCACHE_SPACE": "1"},
        "hardware.accelerator": "cpu",
        "hardware.memory_gib": 2,
        "workload.prompt_tokens": 64,
        "workload.output_tokens": 32,
    }
    return make_recipe({**overrides, **extra})


def test_cpu_kv_space_comes_from_the_environment(make_recipe, tiny_config):
    report = estimate(tiny_cpu(make_recipe), tiny_config)
    # tiny Llama: 4 * (256 * (2 * 256 + 2 * 128) + 3 * 256 * 512) + 2 * 512 * 256 + 9 * 256
    assert report.param_count == 2_623_744
    assert report.weight_bytes == 5_247_488  # bf16, about 5 MB
    # 2 * 4 layers * 2 KV heads * 64 * 2 bytes = 2048 bytes per token
    assert report.kv_bytes_per_token == 2048
    assert (report.gpu_memory_utilization, report.reserve_bytes_per_device) == (None, 0)
    # 1 GiB / (32 * 2048) = 16,384 blocks = 524,288 tokens
    assert report.kv_budget_bytes == 2**30
    assert (report.kv_blocks, report.kv_tokens) == (16_384, 524_288)
    # 64 + 32 = 96 tokens = 3 blocks: 16,384 // 3 = 5461 sequences
    assert report.max_seqs_no_preemption == 5461
    assert report.verdict == "fits"


def test_cpu_fp8_kv_cache_doubles_the_tokens(make_recipe, tiny_config):
    report = estimate(tiny_cpu(make_recipe, **{"engine.kv_cache_dtype": "fp8"}), tiny_config)
    assert report.kv_bytes_per_token == 1024
    assert report.kv_tokens == 2 * 524_288


def test_cpu_without_kv_space_uses_memory_minus_weights(make_recipe, tiny_config):
    report = estimate(tiny_cpu(make_recipe, **{"engine.env": {}}), tiny_config)
    # 2 GiB - 5,247,488 bytes of weights = 2,142,236,160; // 65,536 = 32,687 blocks
    assert report.kv_budget_bytes == 2 * 2**30 - 5_247_488
    assert report.kv_blocks == 32_687
    assert any("VLLM_CPU_KVCACHE_SPACE is not set" in note for note in report.notes)


def test_cpu_block_size_defaults_to_128(make_recipe, tiny_config):
    report = estimate(tiny_cpu(make_recipe, **{"engine.block_size": None}), tiny_config)
    # 1 GiB / (128 * 2048) = 4096 blocks
    assert (report.block_size, report.kv_blocks) == (128, 4096)
    assert report.fits


def test_cpu_rejects_blocks_that_are_not_multiples_of_32(make_recipe, tiny_config):
    report = estimate(tiny_cpu(make_recipe, **{"engine.block_size": 16}), tiny_config)
    assert report.problems == ["block_size 16: the CPU engine needs a multiple of 32"]


def test_cpu_rejects_fractional_kv_space(make_recipe, tiny_config):
    recipe = tiny_cpu(make_recipe, **{"engine.env": {"VLLM_CPU_KVCACHE_SPACE": "1.5"}})
    report = estimate(recipe, tiny_config)
    assert report.problems == [
        "engine.env VLLM_CPU_KVCACHE_SPACE='1.5': vLLM accepts whole GiB only"
    ]


def test_cpu_kv_space_larger_than_memory_warns(make_recipe, tiny_config):
    recipe = tiny_cpu(make_recipe, **{"engine.env": {"VLLM_CPU_KVCACHE_SPACE": 2}})
    report = estimate(recipe, tiny_config)
    assert report.fits
    assert report.warnings[0].startswith(
        "KV space 2 GiB plus weights 0.00 GiB exceed hardware.memory_gib 2"
    )


def test_cpu_bandwidth_override_sets_the_decode_floor(make_recipe, tiny_config):
    recipe = tiny_cpu(make_recipe, **{"hardware.bandwidth_gbps": 10})
    report = estimate(recipe, tiny_config)
    # (5,247,488 + 96 * 2048) / 10e9 s = 0.5444096 ms
    assert report.bandwidth_gbps == 10
    assert report.decode_floors[0].tpot_floor_ms == pytest.approx(0.5444096)


def test_memory_override_changes_the_gpu_budget(make_recipe, llama2_config):
    recipe = a10_gptq(make_recipe, **{"hardware.memory_gib": 16})
    report = estimate(recipe, llama2_config)
    # int(16 GiB * 0.9) = 15,461,882,265 - 3,889,307,648 - 1,073,741,824 = 10,498,832,793
    assert report.memory_gib == 16
    assert report.kv_budget_bytes == 10_498_832_793
    assert report.kv_blocks == 10_498_832_793 // 8_388_608  # 1251


# --- the report ----------------------------------------------------------------------------


def test_report_dict_is_json_ready(make_recipe, llama2_config):
    data = estimate(a10_gptq(make_recipe), llama2_config).to_dict()
    assert data["verdict"] == "fits"
    assert data["kv_tokens"] == 63_968
    assert data["decode_floors"][0]["batch"] == 1
    assert json.loads(json.dumps(data)) == data


def test_plan_imports_neither_torch_nor_vllm():
    code = (
        "import sys, model_optimizer.plan; "
        "print(sorted(m for m in ('torch', 'vllm', 'transformers') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_explicit_kv_cache_memory_bytes_sizes_the_cache():
    """extra_args kv-cache-memory-bytes replaces the utilization / CPU space arithmetic."""
    from pathlib import Path

    from model_optimizer.plan import estimate
    from model_optimizer.recipe import load_recipe
    root = Path(__file__).resolve().parents[3]
    loaded = load_recipe(root / "recipes" / "tiny-cpu.yaml",
                         ["engine.extra_args={kv-cache-memory-bytes: 2097152}"])
    tiny = {"hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
            "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512,
            "max_position_embeddings": 2048, "torch_dtype": "bfloat16"}
    report = estimate(loaded.resolved, tiny)
    # 2 MiB / (2 x 4 layers x 2 KV heads x 64 dims x 2 bytes = 2048 B/token) = 1024 tokens,
    # 32 blocks of 32; a 64 + 32 token sequence takes 3 blocks -> 10 sequences
    assert report.kv_bytes_per_token == 2048
    assert report.kv_tokens == 1024
    assert report.max_seqs_no_preemption == 10
