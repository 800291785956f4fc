"""The planner against real vLLM (CPU engine): a tiny mixture-of-experts model served once,
vLLM's logged KV capacity ("CPU KV cache size: N tokens, Maximum concurrency for L tokens
per request: Cx") equal to the plan's for the same recipe. benchmarks/gpu_probe.py --moe
does the same on a GPU."""

from __future__ import annotations

import importlib.util
import socket

import pytest

from .conftest import ROOT

pytestmark = pytest.mark.integration


def _probe():
    spec = importlib.util.spec_from_file_location("gpu_probe", ROOT / "benchmarks" / "gpu_probe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_vllm_kv_capacity_of_a_tiny_moe_matches_the_plan(tiny_model, tmp_path):
    probe = _probe()
    folder = probe.build_tiny_moe(tmp_path, tiny_model)
    # 1 GiB of CPU KV cache; 4 layers x 2 KV heads x 64 x 2 (K, V) x 2 bytes = 2048 bytes per
    # token: 524,288 tokens, 128 requests of 4096 tokens
    plan = probe.planned_capacity(folder, "cpu", {"env": {"VLLM_CPU_KVCACHE_SPACE": "1"}})
    assert (plan["kv_tokens"], plan["max_concurrency"]) == (524_288, 128.0)
    assert plan["moe"] == "8 routed experts, top-2 per token"
    served = probe.serve_and_read(folder, timeout_s=400, port=_free_port(),
                                  env={"VLLM_CPU_KVCACHE_SPACE": "1"})
    assert "kv_tokens" in served, served
    assert served["pool"] == "CPU"
    assert (served["kv_tokens"], served["max_concurrency"], served["max_model_len"]) == (
        plan["kv_tokens"], plan["max_concurrency"], 4096)
