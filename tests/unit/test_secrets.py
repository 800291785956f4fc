"""Secrets never reach an archive."""

import pytest

from model_optimizer.secrets import (
    REDACTED,
    is_secret_name,
    looks_like_token,
    redact_argv,
    redact_env,
    redact_mapping,
    redact_override,
    redact_text,
    redact_url,
    secret_values,
)


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


@pytest.mark.parametrize("name", ["HFTOKEN", "GH_PAT", "S3_SECRETKEY", "MYPASSPHRASE", "JWT",
                                  "PRIVATEKEY", "aws_session_token", "DB_PWD"])
def test_widened_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["long-prefill-token-threshold", "return-tokens-as-token-ids",
                                  "allow-credentials", "TOKENIZERS_PARALLELISM", "KEYRING_X"])
def test_settings_about_tokens_are_not_secrets(name):
    assert not is_secret_name(name)


def test_url_passwords_and_query_values_are_scrubbed():
    url = "postgresql://mopt:hunter2@db:5432/mopt?password=hunter3&sslmode=require"
    scrubbed = redact_url(url)
    assert "hunter2" not in scrubbed and "hunter3" not in scrubbed
    assert scrubbed.startswith("postgresql://mopt:") and "@db:5432/mopt?password=" in scrubbed


@pytest.mark.parametrize("token", [
    "hf_abcdefghijklmnopqrstuvwxyz", "ghp_abcdefghijklmnopqrstuvwxyz", "sk-abcdefghijklmnop1234",
    "AKIAABCDEFGHIJKLMNOP", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcDEF123",
    "Zx8Qm2Lk9Vb7Tn4Rw6Yp3Hs5Jd1Fg0Ac",
])
def test_token_shaped_values_are_hidden_in_text(token):
    assert looks_like_token(token)
    assert token not in redact_text(f"starting with {token} now")


@pytest.mark.parametrize("value", ["/work/models/tiny-llama", "0123456789abcdef" * 2 + "01234567",
                                   "TheBloke/Llama-2-7B-Chat-GPTQ", "bfloat16", "127.0.0.1"])
def test_ordinary_values_are_kept(value):
    assert not looks_like_token(value) and redact_text(value) == value


def test_overrides_and_mappings_are_redacted():
    assert redact_override("engine.env.GH_PAT=abc") == f"engine.env.GH_PAT={REDACTED}"
    assert redact_override("engine.max_num_seqs=8") == "engine.max_num_seqs=8"
    data = redact_mapping({"storage": "postgresql://u:pw@h/x", "n": 3,
                           "nested": [{"JWT": "abc"}]})
    assert data == {"storage": f"postgresql://u:{REDACTED}@h/x", "n": 3,
                    "nested": [{"JWT": REDACTED}]}


def test_known_values_are_hidden_in_logs():
    log = "INFO non-default args: {'api_key': '***'}\nERROR token s3cr3t-value rejected\n"
    assert "s3cr3t-value" not in redact_text(log, ["s3cr3t-value"])
    assert secret_values(["--api-key", "k1", "--hf-token=k2", "--port", "80"],
                         {"HF_TOKEN": "k3", "OMP_NUM_THREADS": "2"}) == ["k3", "k1", "k2"]
