"""The mock server's own endpoints, counting rules and command line."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from model_optimizer.load.mock_server import MockServer, _parse_args, count_prompt_tokens


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read().decode()


def post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_health_models_and_metrics():
    with MockServer(model="tiny") as server:
        assert get(server.url + "/health")[0] == 200
        status, models = get(server.url + "/v1/models")
        assert status == 200 and json.loads(models)["data"][0]["id"] == "tiny"
        post(server.url + "/v1/completions", {"model": "tiny", "prompt": "a b", "max_tokens": 3})
        status, metrics = get(server.url + "/metrics")
    assert status == 200
    assert 'vllm:num_requests_running{engine="0",model_name="tiny"} 0.0' in metrics
    assert "# TYPE vllm:kv_cache_usage_perc gauge" in metrics
    assert 'vllm:generation_tokens_total{engine="0",model_name="tiny"} 3.0' in metrics
    assert 'vllm:prompt_tokens_total{engine="0",model_name="tiny"} 2.0' in metrics


def test_non_streamed_answers_carry_usage():
    with MockServer(ttft_s=0.05, itl_s=0.01) as server:
        started = time.perf_counter()
        status, body = post(server.url + "/v1/completions",
                            {"model": "mock-model", "prompt": [5, 6, 7], "max_tokens": 4})
        elapsed_s = time.perf_counter() - started
        _, chat = post(server.url + "/v1/chat/completions",
                       {"messages": [{"role": "user", "content": "one two"}],
                        "max_completion_tokens": 2})
    assert status == 200
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    assert body["choices"][0]["text"] == " t0 t1 t2 t3"
    assert elapsed_s >= 0.05 + 3 * 0.01
    assert chat["usage"]["prompt_tokens"] == 2
    assert chat["choices"][0]["message"]["content"] == " t0 t1"


def test_injected_http_failure_and_wrong_model():
    with MockServer(fail_every_n=2, fail_status=503) as server:
        url = server.url + "/v1/completions"
        assert post(url, {"prompt": "x", "max_tokens": 1})[0] == 200
        status, body = post(url, {"prompt": "x", "max_tokens": 1})
        assert status == 503 and "injected failure" in body["error"]["message"]
        assert post(url, {"model": "nope", "prompt": "x"})[0] == 404


def test_prompt_token_counting_rules():
    assert count_prompt_tokens({"prompt": "one  two\nthree"}) == 3
    assert count_prompt_tokens({"prompt": [1, 2, 3, 4]}) == 4
    assert count_prompt_tokens({"messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "a b c"}]}]}) == 5


def test_command_line_arguments():
    args = _parse_args(["--port", "9", "--ttft-ms", "5", "--itl-ms", "1.5"])
    assert (args.port, args.ttft_ms, args.itl_ms) == (9, 5.0, 1.5)


@pytest.mark.slow
def test_runs_as_a_module(tmp_path):
    with MockServer() as probe:  # borrow a free port number, then release it
        port = probe.port
    process = subprocess.Popen([sys.executable, "-m", "model_optimizer.load.mock_server",
                                "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert "mock OpenAI server" in process.stdout.readline()
        deadline = time.monotonic() + 10
        while True:
            try:
                assert get(f"http://127.0.0.1:{port}/health")[0] == 200
                break
            except (urllib.error.URLError, ConnectionError):
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_max_num_seqs_batches_requests_and_the_rest_wait():
    with MockServer(ttft_s=0.5, max_num_seqs=2) as server:
        seen_running, seen_waiting = [], []
        started = time.perf_counter()
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(post, server.url + "/v1/completions",
                                   {"prompt": "a", "max_tokens": 1}) for _ in range(4)]
            while not all(f.done() for f in futures):
                seen_running.append(server.counters.running)
                seen_waiting.append(server.counters.waiting)
                time.sleep(0.01)
        elapsed = time.perf_counter() - started
        assert [f.result()[0] for f in futures] == [200] * 4
        _, metrics = get(server.url + "/metrics")
    assert max(seen_running) == 2 and max(seen_waiting) >= 1
    assert elapsed >= 1.0  # two batches of 0.5 s each: the third request waited for a slot
    assert "vllm:num_requests_waiting" in metrics


def test_vllm_server_flags_are_accepted_and_unknown_ones_ignored():
    args = _parse_args(["--model", "/models/x", "--served-model-name", "x", "--host", "::1",
                        "--port", "7", "--max-num-seqs", "3", "--block-size", "32",
                        "--enforce-eager", "--no-enable-prefix-caching", "--max-model-len",
                        "512", "--kv-cache-dtype", "auto", "--mock-engine-core", "setsid"])
    assert (args.model, args.served_model_name, args.host, args.port, args.max_num_seqs) == (
        "/models/x", "x", "::1", 7, 3)
    assert args.mock_engine_core == "setsid"
    # no prefix matching: vLLM's --max-num-batched-tokens is not the mock's --max-num-seqs
    assert _parse_args(["--max-num-batched-tokens", "9"]).max_num_seqs == 0
