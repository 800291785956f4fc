"""Do mopt's figures agree with ``vllm bench serve`` on the same running vLLM server?

Both clients send the same workload to ``--url``: random prompts of ``--prompt-tokens``
tokens (mopt: its exact-length prompts; vLLM: its ``random`` dataset with range ratio 0),
``--output-tokens`` tokens with ``ignore_eos``, ``--concurrency`` in flight, closed loop,
``--num-requests`` measured after ``--warmup`` warm-up requests. With ``--repeats N`` the
clients alternate N times and the medians of the repeats are compared (docs/design.md section 3).

Printed per client: median TTFT, median TPOT, median ITL, request and output throughput,
mean prompt tokens the server counted; then mopt / vLLM ratios (1.00 = agreement).

Usage: ``python benchmarks/agreement.py --url http://127.0.0.1:8000 --model-dir models/tiny-llama``
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from client_capacity import run_vllm_bench, vllm_bench_argv  # noqa: E402
from quiet import add_quiet_args, require_quiet  # noqa: E402

from model_optimizer.load import PromptSource, run_load_sync, summarize  # noqa: E402

FIGURES = {  # label: (mopt summary key, vllm bench result key)
    "TTFT median (ms)": ("ttft_p50_ms", "median_ttft_ms"),
    "TPOT median (ms)": ("tpot_p50_ms", "median_tpot_ms"),
    "ITL median (ms)": ("itl_p50_ms", "median_itl_ms"),
    "requests/s": ("qps", "request_throughput"),
    "output tokens/s": ("output_tok_s", "output_throughput"),
    "prompt tokens/request": ("prompt_tokens_mean", "prompt_tokens_mean"),
}


def served_model_name(url: str) -> str:
    """The first model the server lists on /v1/models."""
    with urllib.request.urlopen(url.rstrip("/") + "/v1/models", timeout=10) as response:
        return json.loads(response.read())["data"][0]["id"]


def mopt_figures(args: argparse.Namespace, model: str) -> dict:
    workload = {"endpoint": "completions", "prompt_tokens": args.prompt_tokens,
                "output_tokens": args.output_tokens, "shared_prefix_tokens": 0,
                "concurrency": args.concurrency, "request_rate": "inf",
                "num_requests": args.num_requests, "duration_s": None,
                "warmup_requests": args.warmup, "request_timeout_s": 600, "seed": args.seed}
    source = PromptSource(args.model_dir, args.prompt_tokens, 0, args.seed)
    prompts = source.make(args.warmup + args.num_requests)
    result = run_load_sync(args.url, model, workload, prompts)
    summary = summarize(result.records, result.window_s,
                        output_tokens_expected=args.output_tokens)
    completed = summary["completed"] or 1
    summary["prompt_tokens_mean"] = summary["total_prompt_tokens"] / completed
    return summary


def vllm_figures(args: argparse.Namespace, model: str) -> dict:
    argv = vllm_bench_argv(args.url, model, args.model_dir, input_len=args.prompt_tokens,
                           output_len=args.output_tokens, num_prompts=args.num_requests,
                           concurrency=args.concurrency, request_rate=None, seed=args.seed,
                           served_model_name=model)
    argv += ["--num-warmups", str(args.warmup)]
    result = run_vllm_bench([argv])[0]
    completed = result.get("completed") or 1
    result["prompt_tokens_mean"] = (result.get("total_input_tokens") or 0) / completed
    return result


def median_of(runs: list[dict], key: str) -> float | None:
    values = [run.get(key) for run in runs if run.get(key) is not None]
    return statistics.median(values) if values else None


def print_comparison(mopt_runs: list[dict], vllm_runs: list[dict]) -> None:
    print(f"\n{'figure':<24}{'mopt':>12}{'vllm bench':>14}{'mopt/vllm':>12}")
    for label, (mopt_key, vllm_key) in FIGURES.items():
        mopt_value, vllm_value = median_of(mopt_runs, mopt_key), median_of(vllm_runs, vllm_key)
        ratio = (mopt_value / vllm_value if mopt_value is not None and vllm_value
                 else None)
        cells = ["-" if value is None else f"{value:.2f}"
                 for value in (mopt_value, vllm_value, ratio)]
        print(f"{label:<24}{cells[0]:>12}{cells[1]:>14}{cells[2]:>12}")
    failed = [run.get("failed", 0) for run in mopt_runs], [run.get("failed", 0)
                                                          for run in vllm_runs]
    print(f"failed requests per repeat: mopt {failed[0]}, vllm bench {failed[1]}")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="base URL of a running vLLM server")
    parser.add_argument("--model-dir", required=True, help="model folder (for its tokenizer)")
    parser.add_argument("--served-name", help="model name on the server (default: listed)")
    parser.add_argument("--prompt-tokens", type=int, default=128)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--num-requests", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    add_quiet_args(parser)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    print(f"machine before: {require_quiet(args)}", flush=True)  # refuses when busy
    model = args.served_name or served_model_name(args.url)
    print(f"server {args.url}, model {model!r}: {args.prompt_tokens} prompt / "
          f"{args.output_tokens} output tokens, concurrency {args.concurrency}, "
          f"{args.num_requests} requests, {args.repeats} repeat(s)")
    mopt_runs, vllm_runs = [], []
    for repeat in range(args.repeats):
        order = ("mopt", "vllm") if repeat % 2 == 0 else ("vllm", "mopt")
        for client in order:
            if client == "mopt":
                mopt_runs.append(mopt_figures(args, model))
            else:
                vllm_runs.append(vllm_figures(args, model))
            print(f"  repeat {repeat + 1}: {client} done", flush=True)
    print_comparison(mopt_runs, vllm_runs)


if __name__ == "__main__":
    main()
