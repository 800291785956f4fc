"""A model folder with a real config.json and fake weights, and recipes serving it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model_optimizer.models.pins import checkpoint_hash

ROOT = Path(__file__).resolve().parents[3]

TINY_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama",
               "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
               "max_position_embeddings": 512, "torch_dtype": "bfloat16",
               "tie_word_embeddings": False}


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    """``tmp/models/tiny``: config.json and one weight file (hashable by models.pins)."""
    folder = tmp_path / "models" / "tiny"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(TINY_CONFIG))
    (folder / "model.safetensors").write_bytes(b"weights v1")
    return folder


#: what a sweep writes into the revision it validated (an export refuses a recipe without)
VALIDATED = ('validated:\n  at: "2026-01-02T03:04:05Z"\n  run_id: 20260102T030405Z-tiny-export-'
             'a1b2c3\n  by: sweep\n')


def write_recipe(folder: Path, model: Path | str, *, pins: bool = False,
                 accelerator: str = "cpu", extra_engine: str = "", name: str = "tiny.yaml",
                 validated: str = VALIDATED, revision: str | None = None) -> Path:
    """A tiny-cpu-like recipe serving ``model`` (with its pins when ``pins``), validated by a
    sweep unless ``validated`` says otherwise ("" for a recipe never validated)."""
    pin_block = ""
    if pins:
        found = checkpoint_hash(model)
        files = "".join(f"\n        {n}: {d}" for n, d in found.files.items())
        pin_block = f"\n  pins:\n    sha256: {found.sha256}\n    files:{files}"
    hardware = ("accelerator: cpu\n  memory_gib: 2" if accelerator == "cpu"
                else f"accelerator: {accelerator}\n  count: 2")
    env = '  env:\n    VLLM_CPU_KVCACHE_SPACE: "1"\n' if accelerator == "cpu" else ""
    kv = "" if accelerator == "cpu" else "  tensor_parallel_size: 2\n"
    model_revision = f"  revision: {revision}\n" if revision else ""
    text = (f"recipe_version: 1\nname: tiny-export\nrevision: 3\nmodel:\n  path: {model}\n"
            f"{model_revision}"
            f"  dtype: bfloat16\n  served_name: tiny-llama{pin_block}\n"
            f"engine:\n  block_size: 32\n  max_model_len: 512\n  max_num_seqs: 8\n"
            f"  enable_prefix_caching: false\n  enforce_eager: true\n{kv}{env}{extra_engine}"
            f"  startup_timeout_s: 300\nhardware:\n  {hardware}\n"
            "workload:\n  prompt_tokens: 64\n  output_tokens: 32\n  num_requests: 10\n"
            + validated)
    path = folder / name
    path.write_text(text)
    return path
