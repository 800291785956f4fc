"""What mopt trusts from a server, on the real vLLM CPU server (issue 24, docs/security.md).

One launch: `mopt bench --url` given the server's ``/v1`` URL with user info and a query
(joined as ``/v1/completions?...``, never ``/v1/v1`` nor a path after the query; the user
info sent as Basic auth, which vLLM without ``--api-key`` ignores), no ``--tokenizer`` (the
tokenize calls and ``/v1/models`` go through the total-deadline client), telemetry scraped
from ``/metrics`` through it, and vLLM's real ``usage`` accepted by the plausibility rule.
"""

from __future__ import annotations

import json
import os

import pytest

from model_optimizer.engine import EngineProcess
from model_optimizer.recipe import load_recipe
from model_optimizer.recipe.render import server_env, vllm_argv

from .conftest import TINY_RECIPE, only_archive, read_jsonl, run_mopt

pytestmark = pytest.mark.integration
SECRET = "pw-integration-4242"


def test_bench_url_with_v1_credentials_and_query_is_measured_and_scrubbed(tiny_model,
                                                                           tmp_path):
    loaded = load_recipe(TINY_RECIPE)
    port = 18500 + os.getpid() % 500
    engine = EngineProcess(vllm_argv(loaded.resolved, loaded.base_dir, port=port),
                           server_env(loaded.resolved), tmp_path / "engine.log",
                           f"http://127.0.0.1:{port}", startup_timeout_s=300)
    runs = tmp_path / "runs"
    url = f"http://alice:{SECRET}@127.0.0.1:{port}/v1?trace={SECRET}"
    with engine:
        engine.wait_ready()
        result = run_mopt("bench", "--url", url, "--prompt-tokens", "24",
                          "--output-tokens", "8", "--concurrency", "2", "--num-requests",
                          "12", "--runs-dir", str(runs), timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    archive = only_archive(runs)
    records = [r for r in read_jsonl(archive / "requests.jsonl") if not r["warmup"]]
    assert len(records) == 12 and all(r["ok"] for r in records)
    assert {r["output_tokens"] for r in records} == {8}  # vLLM's usage passes the rule
    assert {r["prompt_tokens"] for r in records} == {24}  # counted by vLLM's /tokenize
    samples = read_jsonl(archive / "telemetry.jsonl")
    assert any(s.get("num_requests_running") is not None for s in samples)  # /metrics read
    run = json.loads((archive / "run.json").read_text())
    assert run["url"].startswith("http://alice:***redacted***@")
    for path in runs.rglob("*"):
        if path.is_file() and path.suffix != ".sqlite":
            assert SECRET not in path.read_text(errors="replace"), path
    assert SECRET not in result.stdout + result.stderr
