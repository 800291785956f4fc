"""The planner on real published config.json files (tests/data/configs, sources in its
README): parameters within 0.5 % of the published count, KV bytes per token exact, and the
fit verdicts of `mopt plan` and `mopt init` on an A10, an L40S and an H200.

KV bytes per token are worked by hand here, in the served 16-bit dtype, summed over every
attention layer (what vLLM's "GPU KV cache size: N tokens" divides by):
K + V = 2 x kv_heads x head_dim x 2 bytes per layer; MLA one latent vector of
kv_lora_rank + qk_rope_head_dim elements per layer; Mamba layers hold no per-token KV.

Fit verdicts by hand, with recipe defaults (gpu_memory_utilization 0.9, 1 GiB reserve,
max_model_len = the model's max_position_embeddings, 2048-token prefill chunks): usable
memory is 0.9 x 22.49 = 20.24 GiB on an A10, 0.9 x 44.99 = 40.49 GiB on an L40S and
0.9 x 140.4 = 126.4 GiB on an H200, minus the weights and the reserve, must hold one
max_model_len request.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.plan import ModelShape, estimate, load_model_config

from .conftest import DATA

CONFIGS = DATA / "configs"

# name: (published parameters, KV bytes per token, fits at the model's max length on
#        (A10, L40S, H200))
PUBLISHED = {
    # 6.74B (model card); 2 x 32 layers x 32 heads x 128 x 2 = 524,288; 12.6 GiB of weights,
    # a 4096-token request is 2 GiB: fits everywhere
    "llama-2-7b": (6.74e9, 524_288, (True, True, True)),
    # 8.03B; 2 x 32 x 8 x 128 x 2 = 131,072; 15.0 GiB weights: a 131,072-token request is
    # 16 GiB, more than the A10's 4.3 GiB left, less than the L40S's 24.5
    "llama-3.1-8b": (8.03e9, 131_072, (False, True, True)),
    # 8.2B (model card; 8.19B on the hub); 2 x 36 x 8 x 128 x 2 = 147,456; 15.3 GiB weights,
    # 40,960 tokens = 5.6 GiB > the A10's 3.98 GiB left
    "qwen3-8b": (8.19e9, 147_456, (False, True, True)),
    # 7.24B; 2 x 32 x 8 x 128 x 2 = 131,072, every layer windowed at 4096: a 32,768-token
    # request holds 4095 + 2048 tokens per layer (0.75 GiB): fits on the A10 too
    "mistral-7b-v0.1": (7.24e9, 131_072, (True, True, True)),
    # 9.24B; 2 x 42 x 8 x 256 x 2 = 344,064 (21 full + 21 windowed at 4096); float32
    # checkpoint served in 16 bits: 17.2 GiB; 8192 tokens on 21 full layers (1.31 GiB) +
    # 6160 on 21 windowed (0.99 GiB) = 2.3 GiB > the A10's 2.04 GiB left
    "gemma-2-9b": (9.24e9, 344_064, (False, True, True)),
    # 1.0B (999,885,952); 2 x 26 x 1 x 256 x 2 = 26,624 (4 full + 22 windowed at 512)
    "gemma-3-1b": (1.0e9, 26_624, (True, True, True)),
    # 3.82B; 2 x 32 x 32 x 96 x 2 = 393,216 (every layer windowed at 2047)
    "phi-3-mini-4k": (3.82e9, 393_216, (True, True, True)),
    # 46.7B, all experts held: 87.0 GiB of weights; 2 x 32 x 8 x 128 x 2 = 131,072
    "mixtral-8x7b": (46.7e9, 131_072, (False, False, True)),
    # 30.5B: 56.9 GiB; 2 x 48 x 4 x 128 x 2 = 98,304
    "qwen3-30b-a3b": (30.5e9, 98_304, (False, False, True)),
    # 20.9B (model card: 20.91B); MXFP4 experts (4.25 bits) + bf16 rest = 12.8 GiB;
    # 2 x 24 x 8 x 64 x 2 = 49,152 (12 full + 12 windowed at 128): a 131,072-token request
    # is 3.0 GiB on the full layers, less than the A10's 6.4 GiB left
    "gpt-oss-20b": (20.9e9, 49_152, (True, True, True)),
    # 15.7B: 29.3 GiB > the A10's 20.2; MLA 27 layers x (512 + 64) x 2 = 31,104;
    # 163,840 tokens = 4.75 GiB < the L40S's 10.2 GiB left
    "deepseek-v2-lite": (15.7e9, 31_104, (False, True, True)),
    # 51.6B: 96.1 GiB; 4 attention layers of 32: 4 x 2 x 8 x 128 x 2 = 16,384; 28 Mamba
    # layers hold (3 x 8192 + 8192 x 16) x 2 = 311,296 bytes each per sequence
    "jamba-v0.1": (51.6e9, 16_384, (False, False, True)),
}
ACCELERATORS = ("A10", "L40S", "H200")


def _config(name: str) -> dict:
    return load_model_config(CONFIGS / f"{name}.json")


def test_the_set_covers_every_family_the_issue_names():
    assert len(PUBLISHED) >= 12
    assert sorted(p.stem for p in CONFIGS.glob("*.json")) == sorted(PUBLISHED)
    shapes = {name: ModelShape.from_config(_config(name)) for name in PUBLISHED}
    assert {n for n, s in shapes.items() if s.moe} >= {"mixtral-8x7b", "qwen3-30b-a3b",
                                                       "gpt-oss-20b", "deepseek-v2-lite"}
    assert shapes["deepseek-v2-lite"].layout.is_mla
    assert {n for n, s in shapes.items() if s.layout.windows} == {
        "mistral-7b-v0.1", "gemma-2-9b", "gemma-3-1b", "phi-3-mini-4k", "gpt-oss-20b"}
    assert shapes["jamba-v0.1"].layout.state_layers == 28


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameters_within_half_a_percent_of_the_published_count(name):
    shape = ModelShape.from_config(_config(name))
    published = PUBLISHED[name][0]
    assert abs(shape.param_count - published) / published < 0.005
    assert shape.breakdown.source.startswith("transformers")


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_kv_bytes_per_token_exact(make_recipe, name):
    report = estimate(make_recipe({"hardware.accelerator": "H200"}), _config(name))
    assert report.kv_bytes_per_token == PUBLISHED[name][1]


def _model_dir(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text((CONFIGS / f"{name}.json").read_text())
    return folder


def _plan(recipe: Path, *sets: str) -> tuple[int, dict]:
    args = ["plan", str(recipe), "--json"]
    for item in sets:
        args += ["--set", item]
    result = CliRunner().invoke(app, args)
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_plan_and_init_verdicts_on_a10_l40s_h200(tmp_path, name):
    folder = _model_dir(tmp_path, name)
    limit = _config(name)["max_position_embeddings"]
    for accel, fits_full_length in zip(ACCELERATORS, PUBLISHED[name][2], strict=True):
        out = tmp_path / f"{accel}.yaml"
        made = CliRunner().invoke(app, ["init", str(folder), "-o", str(out), "--accelerator",
                                        accel.lower(), "--json"])
        assert made.exit_code == 0, made.output
        init = json.loads(made.stdout)
        # at the model's own max length: the verdict worked out above
        code, full = _plan(out, f"engine.max_model_len={limit}")
        assert (code == 0) == fits_full_length, (accel, full["problems"])
        assert (full["verdict"] != "does not fit") == fits_full_length
        # init's recipe: its own verdict, and max_num_seqs what the plan says fits
        code, planned = _plan(out)
        assert planned["verdict"] == init["plan"]
        weights_fit = not any("weights alone" in p for p in planned["problems"])
        assert (code == 0) == weights_fit, (accel, planned["problems"])
        seqs = yaml.safe_load(out.read_text())["engine"]["max_num_seqs"]
        if weights_fit:
            assert seqs == min(planned["max_seqs_no_preemption"],
                               planned["recipe_max_num_seqs"])
            assert not any("will preempt" in w for w in planned["warnings"])
