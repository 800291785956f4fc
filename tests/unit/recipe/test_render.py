"""The exact vLLM argv, environment and native config built from recipes."""

import sys
from pathlib import Path

import pytest
import yaml

from model_optimizer.errors import UsageError
from model_optimizer.recipe import load_recipe
from model_optimizer.recipe.render import expand_references, server_env, vllm_argv, vllm_config
from model_optimizer.recipe.writer import write_vllm_config

ROOT = Path(__file__).resolve().parents[3]


def test_tiny_cpu_argv_is_exact():
    loaded = load_recipe(ROOT / "recipes" / "tiny-cpu.yaml")
    argv = vllm_argv(loaded.resolved, loaded.base_dir, port=8123, python="/py")
    assert argv == [
        "/py", "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(ROOT / "models" / "tiny-llama"),
        "--served-model-name", "tiny-llama", "--dtype", "bfloat16",
        "--no-trust-remote-code", "--host", "127.0.0.1", "--port", "8123",
        "--kv-cache-dtype", "auto",
        "--block-size", "32", "--max-model-len", "512", "--max-num-seqs", "8",
        "--max-num-batched-tokens", "2048", "--no-enable-prefix-caching",
        "--tensor-parallel-size", "1", "--enforce-eager"]
    assert server_env(loaded.resolved) == {"VLLM_CPU_KVCACHE_SPACE": "1"}


def test_gpu_recipe_argv_is_exact():
    loaded = load_recipe(ROOT / "recipes" / "7b-int4-a10.yaml",
                         ["engine.enforce_eager=true",
                          "engine.extra_args={disable-log-stats: true, max-log-len: 10}"])
    argv = vllm_argv(loaded.resolved, loaded.base_dir, port=9000)
    assert argv[0] == sys.executable
    assert argv[3:] == [
        "--model", "TheBloke/Llama-2-7B-Chat-GPTQ", "--served-model-name", "llama-2-7b-chat",
        "--revision", "main", "--quantization", "gptq", "--dtype", "float16",
        "--no-trust-remote-code", "--host", "127.0.0.1", "--port", "9000",
        "--kv-cache-dtype", "fp8",
        "--block-size", "32", "--max-model-len", "4096", "--max-num-seqs", "24",
        "--max-num-batched-tokens", "4096", "--gpu-memory-utilization", "0.9",
        "--enable-prefix-caching", "--tensor-parallel-size", "1", "--enforce-eager",
        "--disable-log-stats", "--max-log-len", "10"]


def test_native_config_matches_argv(tmp_path):
    loaded = load_recipe(ROOT / "recipes" / "7b-int4-a10.yaml")
    config = vllm_config(loaded.resolved, loaded.base_dir)
    assert "port" not in config  # port 0 means "mopt picks one"
    out = tmp_path / "vllm.yaml"
    write_vllm_config(out, config, source="recipes/7b-int4-a10.yaml")
    written = yaml.safe_load(out.read_text())
    assert written == config
    assert written["quantization"] == "gptq" and written["enable-prefix-caching"] is True


def test_references_expand_from_the_environment():
    assert expand_references(["--api-key", "${K}", "x"], {"K": "s3cret"}) == [
        "--api-key", "s3cret", "x"]
    assert expand_references({"HF_TOKEN": "${T}"}, {"T": "t0ken"}) == {"HF_TOKEN": "t0ken"}


@pytest.mark.parametrize("environ", [{}, {"K": ""}])
def test_an_unset_or_empty_reference_is_an_error_naming_it_and_the_fix(environ):
    """Not ``--api-key ''``: that would start a server without authentication."""
    with pytest.raises(UsageError) as info:
        expand_references(["--api-key", "${K}", "--x", "${OTHER}"], {**environ, "OTHER": "o"})
    assert "${K}" in str(info.value) and "export K=..." in str(info.value)
    assert "OTHER" not in str(info.value)
    with pytest.raises(UsageError, match=r"\$\{A\}, \$\{B\}.*they are unset"):
        expand_references({"X": "${B}", "Y": "${A}"}, {})
