"""Fleet texts for the fleet's unit tests: a two-instance CPU fleet, changed per test."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = ROOT / "recipes" / "tiny-cpu-fleet.yaml"

INLINE_ENGINE = {"block_size": 32, "max_model_len": 2048, "max_num_seqs": 4,
                 "enforce_eager": True}


def cpu_fleet(**changes) -> dict:
    """Two inline tiny instances on cores 0 and 1, short/long by length, long the fallback."""
    doc = {
        "kind": "fleet", "fleet_version": 1, "name": "f",
        "hardware": {"accelerator": "cpu", "memory_gib": 4},
        "instances": {
            "short": {"model": {"path": "m", "served_name": "m-short"},
                      "engine": dict(INLINE_ENGINE), "kv_cache_gib": 1, "cores": [0]},
            "long": {"model": {"path": "m", "served_name": "m-long"},
                     "engine": dict(INLINE_ENGINE), "kv_cache_gib": 1, "cores": [1]},
        },
        "router": {"model": "m", "fallback": "long", "routes": [
            {"class": "short", "to": "short", "max_prompt_tokens": 256},
            {"class": "long", "to": "long"}]},
        "workload": {"mix": {
            "short": {"weight": 3, "prompt_tokens": {"dist": "uniform", "min": 32, "max": 96},
                      "output_tokens": 16},
            "long": {"weight": 1, "prompt_tokens": {"dist": "uniform", "min": 800, "max": 1200},
                     "output_tokens": 32}},
            "num_requests": 20},
    }
    for key, value in changes.items():
        doc[key] = value
    return doc


def gpu_fleet(shares=(0.45, 0.45), quant=("gptq", "gptq"), seqs=8) -> dict:
    """Two 7B Llama-2 instances on one A10 with an 8-bit KV cache, like
    recipes/7b-int4-a10.yaml (the model config from examples/)."""
    def inline(name, share, method):
        model = {"path": "meta-llama/Llama-2-7b-hf", "served_name": f"llama-{name}",
                 "dtype": "float16", "quantization": method}
        return {"model": model, "gpu_memory_utilization": share,
                "engine": {"max_model_len": 4096, "max_num_seqs": seqs, "kv_cache_dtype": "fp8"}}
    doc = cpu_fleet()
    doc["hardware"] = {"accelerator": "A10"}
    doc["instances"] = {"a": inline("a", shares[0], quant[0]),
                        "b": inline("b", shares[1], quant[1])}
    doc["router"] = {"model": "llama", "fallback": "b", "routes": [
        {"class": "short", "to": "a", "max_prompt_tokens": 1024}, {"class": "long", "to": "b"}]}
    doc["workload"] = {"prompt_tokens": 1536, "output_tokens": 512, "num_requests": 20}
    return doc


@pytest.fixture
def write_fleet(tmp_path):
    """Write a fleet dict as YAML in tmp_path (members beside it); return the path."""
    def write(doc: dict, name: str = "fleet.yaml") -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        return path
    return write
