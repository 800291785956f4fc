"""Secrets never reach an archive."""

import pytest

from model_optimizer.archive.redact import REDACTED, is_secret_name, redact_argv, redact_env


@pytest.mark.parametrize(("name", "secret"), [
    ("HF_TOKEN", True), ("api-key", True), ("OPENAI_API_KEY", True), ("--api-key", True),
    ("DB_PASSWORD", True), ("aws_secret_access_key", True),
    ("max-num-batched-tokens", False), ("tokenizer", False), ("VLLM_CPU_KVCACHE_SPACE", False),
    ("ssl-keyfile", False), ("output_tokens", False),
])
def test_secret_names(name, secret):
    assert is_secret_name(name) is secret


def test_redact_env_keeps_references_and_plain_values():
    env = {"HF_TOKEN": "hf_live", "MY_API_KEY": "${MY_API_KEY}", "VLLM_CPU_KVCACHE_SPACE": "2"}
    assert redact_env(env) == {"HF_TOKEN": REDACTED, "MY_API_KEY": "${MY_API_KEY}",
                               "VLLM_CPU_KVCACHE_SPACE": "2"}


def test_redact_argv_both_forms():
    argv = ["python", "--api-key", "sk-1", "--max-num-batched-tokens", "2048",
            "--hf-token=abc", "--port", "1"]
    assert redact_argv(argv) == ["python", "--api-key", REDACTED, "--max-num-batched-tokens",
                                 "2048", f"--hf-token={REDACTED}", "--port", "1"]
