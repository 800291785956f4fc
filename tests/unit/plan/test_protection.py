"""The planner on mixed workloads: mean request, long prefill and long generation advice."""

from pathlib import Path

from model_optimizer.plan import estimate
from model_optimizer.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[3]
MIX = ROOT / "recipes" / "tiny-cpu-mix.yaml"


TINY = {"architectures": ["LlamaForCausalLM"], "hidden_size": 256, "intermediate_size": 512,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
        "vocab_size": 512, "max_position_embeddings": 2048, "torch_dtype": "bfloat16"}


def plan(*overrides: str):
    loaded = load_recipe(MIX, list(overrides))
    return estimate(loaded.resolved, TINY)


def test_a_mix_is_planned_at_its_mean_request():
    report = plan()
    # short: (32+96)/2 + 16 = 80 at weight 9; long: lognormal mean ~1428 + 256 at weight 1
    assert 230 <= report.seq_len <= 250
    assert report.max_seqs_no_preemption == report.kv_blocks // report.blocks_per_seq
    assert any("mean request" in note for note in report.notes)


def test_protection_on_is_explained_and_off_is_warned():
    on = plan()
    assert any("chunks of at most 128 tokens" in note for note in on.notes)
    assert any("max_output_tokens 64 cuts generations of up to 256" in n for n in on.notes)
    assert not any("long_prefill_token_threshold" in w for w in on.warnings)
    off = plan("engine.long_prefill_token_threshold=null", "engine.max_output_tokens=null",
               "engine.max_num_batched_tokens=2048")
    assert any("set long_prefill_token_threshold (e.g. 512)" in w for w in off.warnings)
    assert any("engine.max_output_tokens caps them" in n for n in off.notes)
    chunked_off = plan("engine.long_prefill_token_threshold=null",
                       "engine.enable_chunked_prefill=false")
    assert any("chunked prefill is off" in w for w in chunked_off.warnings)


def test_a_request_taking_a_large_share_of_the_kv_cache_is_a_warning():
    roomy = plan()  # 16 MiB at 2 KiB per token: 8,192 tokens, the longest takes 22 %
    assert roomy.kv_tokens == 8192
    assert not [w for w in roomy.warnings if "of the KV cache" in w]
    tight = plan("engine.extra_args.kv-cache-memory-bytes=4194304")  # 2,048 tokens
    [warning] = [w for w in tight.warnings if "of the KV cache" in w]
    assert "(1764 tokens) takes 86% of the KV cache (2,048 tokens)" in warning
