"""Real workloads on the real vLLM CPU server: a prompt file, a two-class mix, the output cap.

One server for the module, started with an API key (``--api-key`` from ``${VAR}``) and the
long-request protection knobs (512-token steps with chunked prefill, a 128-token long-prefill
threshold, a server-side output cap), so every test also checks that the key is sent and
never archived, that vLLM accepts the knobs, and that it applies the cap. Whether the
protection helps the short class is measured in benchmarks/long_request_protection.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml

from model_optimizer.engine import EngineProcess
from model_optimizer.recipe import load_recipe
from model_optimizer.recipe.render import expand_references, server_env, vllm_argv

from .conftest import ROOT, TINY_RECIPE, only_archive, read_jsonl, run_mopt

pytestmark = pytest.mark.integration

KEY_VAR = "MOPT_TEST_API_KEY"
KEY = "sk-mopt-integration-0123456789"
OUTPUT_CAP = 40


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The tiny model behind an API key, max_model_len 1024 and a 40-token output cap."""
    from model_optimizer.models.tiny import build_tiny_model

    build_tiny_model(ROOT / "models" / "tiny-llama")
    os.environ[KEY_VAR] = KEY
    folder = tmp_path_factory.mktemp("workload-server")
    loaded = load_recipe(TINY_RECIPE, [
        "engine.max_model_len=1024", f"engine.max_output_tokens={OUTPUT_CAP}",
        "engine.max_num_batched_tokens=512", "engine.enable_chunked_prefill=true",
        "engine.long_prefill_token_threshold=128",
        f"engine.extra_args.api-key=${{{KEY_VAR}}}"])
    port = 19000 + os.getpid() % 1000
    argv = expand_references(vllm_argv(loaded.resolved, loaded.base_dir, port=port),
                             dict(os.environ))
    engine = EngineProcess(argv, server_env(loaded.resolved), folder / "engine.log",
                           f"http://127.0.0.1:{port}", startup_timeout_s=300)
    with engine:
        engine.wait_ready()
        yield engine
    os.environ.pop(KEY_VAR, None)


def bench_recipe(tmp_path: Path, workload: dict, slo: dict | None = None) -> Path:
    """A copy of the tiny recipe with this workload (and SLOs), next to the tiny recipe."""
    recipe = yaml.safe_load(TINY_RECIPE.read_text())
    recipe["model"]["path"] = str(ROOT / "models" / "tiny-llama")
    recipe["engine"]["max_model_len"] = 1024
    # no steady warm-up (up to 30 s a bench, most of these tests' time on a loaded machine):
    # these tests are about the workload's requests, the steady warm-up is test_apply's
    recipe["workload"] = {**recipe["workload"], "api_key_env": KEY_VAR,
                          "warmup_steady_max_s": None, **workload}
    if slo is not None:
        recipe["slo"] = slo
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def run_bench(server, recipe: Path, runs: Path) -> tuple[int, dict, list[dict], Path]:
    result = run_mopt("bench", "--url", server.base_url, "--recipe", str(recipe),
                      "--runs-dir", str(runs), "--json", timeout=400)
    assert result.returncode in (0, 4), result.stdout + result.stderr
    archive = only_archive(runs)
    records = [r for r in read_jsonl(archive / "requests.jsonl") if not r["warmup"]]
    return result.returncode, json.loads(result.stdout)["metrics"], records, archive


def assert_key_not_archived(archive: Path) -> None:
    for path in archive.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


def test_dataset_file_lengths_classes_and_key(server, tmp_path):
    data = ROOT / "examples" / "datasets" / "prompts.jsonl"
    recipe = bench_recipe(tmp_path, {"endpoint": "chat", "dataset": {"path": str(data)},
                                     "num_requests": 12, "concurrency": 3,
                                     "warmup_requests": 1})
    _, metrics, records, archive = run_bench(server, recipe, tmp_path / "runs")
    assert metrics["completed"] == 12 and metrics["failed"] == 0
    assert set(metrics["classes"]) == {"short", "long"}
    assert sum(c["requests"] for c in metrics["classes"].values()) == 12
    from model_optimizer.load.workload import work_items

    loaded = load_recipe(recipe)
    items = work_items(loaded.resolved["workload"], str(ROOT / "models" / "tiny-llama"), 13)
    for record in records:  # measured request i is item warmup + i
        item = items[1 + record["index"]]
        assert record["request_class"] == item.request_class
        assert record["prompt_tokens"] == item.prompt_tokens  # our tokenizer count = vLLM's
        assert record["output_tokens"] == min(item.output_tokens, OUTPUT_CAP)
    items.close()
    long_ = metrics["classes"]["long"]
    assert long_["capped_requests"] == long_["requests"] >= 1  # asked 256, vLLM gave 40
    assert_key_not_archived(archive)


def test_two_class_mix_reports_each_class(server, tmp_path):
    mix = {"short": {"weight": 4, "prompt_tokens": {"dist": "uniform", "min": 16, "max": 48},
                     "output_tokens": 8},
           "long": {"weight": 1, "prompt_tokens": {"dist": "lognormal", "median": 500,
                                                   "sigma": 0.3, "min": 300, "max": 800},
                    "output_tokens": 24}}
    slo = {"ttft_p99_ms": 60000, "classes": {"short": {"ttft_p99_ms": 60000}}}
    recipe = bench_recipe(tmp_path, {"mix": mix, "num_requests": 40, "concurrency": 4}, slo)
    code, metrics, records, archive = run_bench(server, recipe, tmp_path / "runs")
    assert code == 0 and metrics["slo_met"]
    short, long_ = metrics["classes"]["short"], metrics["classes"]["long"]
    assert short["completed"] + long_["completed"] == 40 and metrics["failed"] == 0
    assert short["requests"] > long_["requests"] >= 1
    assert short["qps"] + long_["qps"] == pytest.approx(metrics["qps"], rel=1e-6)
    by_class = {"short": [], "long": []}
    for record in records:
        by_class[record["request_class"]].append(record)
    assert all(16 <= r["prompt_tokens"] <= 48 and r["output_tokens"] == 8
               for r in by_class["short"])
    assert all(300 <= r["prompt_tokens"] <= 800 and r["output_tokens"] == 24
               for r in by_class["long"])
    assert long_["mean_prompt_tokens"] > 4 * short["mean_prompt_tokens"]
    assert short["ttft_p99_ms"] is not None and long_["ttft_p99_ms"] is not None
    report = (archive / "report.md").read_text()
    assert "### Per class" in report and "| short |" in report and "| long |" in report
    assert_key_not_archived(archive)


def test_a_wrong_key_is_refused(server, tmp_path):
    os.environ["MOPT_TEST_WRONG_KEY"] = "not-the-key"
    try:
        result = run_mopt("bench", "--url", server.base_url, "--tokenizer",
                          str(ROOT / "models" / "tiny-llama"), "--api-key-env",
                          "MOPT_TEST_WRONG_KEY", "--num-requests", "2",
                          "--runs-dir", str(tmp_path / "runs"), timeout=120)
    finally:
        os.environ.pop("MOPT_TEST_WRONG_KEY")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "401" in result.stderr or "401" in result.stdout


@pytest.mark.parametrize(("endpoint", "length"), [("completions", 37), ("chat", 45)])
def test_bench_url_counts_tokens_with_the_servers_tokenize_endpoint(server, tmp_path,
                                                                     endpoint, length):
    """No --tokenizer, no --recipe: prompts fitted through vLLM's /tokenize and /detokenize
    (the API key sent along) have exactly the length vLLM reports in usage.prompt_tokens."""
    runs = tmp_path / "runs"
    result = run_mopt("bench", "--url", server.base_url, "--api-key-env", KEY_VAR,
                      "--endpoint", endpoint, "--prompt-tokens", str(length),
                      "--output-tokens", "4", "--num-requests", "8", "--concurrency", "2",
                      "--warmup", "1", "--runs-dir", str(runs), "--json", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    archive = only_archive(runs)
    records = [r for r in read_jsonl(archive / "requests.jsonl") if not r["warmup"]]
    assert len(records) == 8 and all(r["ok"] for r in records)
    assert {r["prompt_tokens"] for r in records} == {length}
    assert_key_not_archived(archive)


def test_the_servers_tokenizer_stands_in_faithfully_for_the_folder(server):
    """Vocabulary size, special ids and so every prompt come out as from the model's folder."""
    from model_optimizer.load.prompts import PromptSource, register_tokenizer
    from model_optimizer.load.server_tokenizer import ServerTokenizer

    tokenizer = ServerTokenizer(server.base_url, "tiny-llama",
                                {"Authorization": f"Bearer {KEY}"})
    remote = PromptSource(register_tokenizer(tokenizer.location, tokenizer), 64, 16, seed=5)
    local = PromptSource(str(ROOT / "models" / "tiny-llama"), 64, 16, seed=5)
    assert len(tokenizer) == len(local.tokenizer)
    assert sorted(remote._special_ids) == sorted(local._special_ids)
    assert remote.make(20) == local.make(20)
    assert [remote.chat_prompt(i, 90) for i in range(5)] == [local.chat_prompt(i, 90)
                                                              for i in range(5)]


def test_capacity_url_without_a_recipe(server, tmp_path):
    """`mopt capacity --url` with no recipe: the sections from --set, prompt tokens counted
    by vLLM's /tokenize, the API key sent and never archived, every window judged."""
    runs = tmp_path / "runs"
    sets = [f"workload.api_key_env={KEY_VAR}", "workload.prompt_tokens=24",
            "workload.output_tokens=8", "workload.warmup_requests=1",
            "slo.ttft_p99_ms=5000", "capacity.start_rate=2", "capacity.max_rate=4",
            "capacity.window_s=2"]
    result = run_mopt("capacity", "--url", server.base_url, "--runs-dir", str(runs), "--json",
                      *[arg for item in sets for arg in ("--set", item)], timeout=300)
    assert result.returncode in (0, 4), result.stdout + result.stderr
    found = json.loads(result.stdout)
    archive = only_archive(runs)
    windows = read_jsonl(archive / "windows.jsonl")
    assert [w["rate"] for w in windows] == [step["rate"] for step in found["steps"]]
    assert windows[0]["rate"] == 2 and all(w["reason"] for w in windows)
    requests = [r for r in read_jsonl(archive / "requests.jsonl") if not r["warmup"]]
    assert requests and {r["prompt_tokens"] for r in requests} == {24}
    run = json.loads((archive / "run.json").read_text())
    assert run["tokenizer"] == f"{server.base_url}/tokenize"
    assert run["url"] == server.base_url and run["argv"] == []
    assert_key_not_archived(archive)
