"""benchmarks/gpu_probe.py's MoE section without a GPU: the KV-capacity log line parsed as
vLLM writes it, and the plan's counterpart for the same recipe."""

from __future__ import annotations

import importlib.util
import json

import pytest

from .conftest import REPO


@pytest.fixture(scope="module")
def probe():
    spec = importlib.util.spec_from_file_location("gpu_probe", REPO / "benchmarks" / "gpu_probe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# vLLM 0.32, v1/core/kv_cache_utils.py update_kv_cache_capacity: one line,
# "%s KV cache size: %s tokens, Maximum concurrency for %s tokens per request: %.2fx"
V032 = ("(EngineCore_DP0 pid=4242) INFO 12-02 04:40:01 [kv_cache_utils.py:2327] GPU KV cache "
        "size: 10,485,760 tokens, Maximum concurrency for 4,096 tokens per request: 2560.00x\n")
# older vLLM (0.8-0.10): two lines from _report_kv_cache_config
OLD = ("INFO 05-01 10:00:00 [kv_cache_utils.py:634] GPU KV cache size: 1,043,312 tokens\n"
       "INFO 05-01 10:00:00 [kv_cache_utils.py:637] Maximum concurrency for 32,768 tokens per "
       "request: 31.84x\n")


def test_parses_the_one_line_form(probe):
    assert probe.parse_kv_capacity("Loading weights...\n" + V032) == {
        "pool": "GPU", "kv_tokens": 10_485_760, "max_concurrency": 2560.0,
        "max_model_len": 4096}


def test_parses_the_two_line_form(probe):
    assert probe.parse_kv_capacity(OLD) == {"pool": "GPU", "kv_tokens": 1_043_312,
                                            "max_concurrency": 31.84, "max_model_len": 32768}


def test_no_capacity_line_gives_none(probe):
    assert probe.parse_kv_capacity("ERROR ... CUDA out of memory\n") is None


def test_planned_capacity_of_the_probe_moe(probe, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({**probe.TINY_MOE, "vocab_size": 512}))
    plan = probe.planned_capacity(tmp_path, "H200")
    # 4 layers x 2 KV heads x 64 x 2 (K, V) x 2 bytes = 2048 bytes per token; a 4096-token
    # request is 8 MiB; the budget is 0.9 x 143771 MiB - 1 GiB - the weights
    budget = plan["kv_budget_gib"] * 2**30
    assert plan["max_concurrency"] == pytest.approx(budget / (4096 * 2048), rel=1e-4)
    assert plan["kv_tokens"] == pytest.approx(budget / 2048, rel=1e-3)
    assert plan["moe"] == "8 routed experts, top-2 per token"
