"""Client against server timing on one vLLM CPU server, and whether the engine sets the pace.

One server of ``--recipe`` (its own placement: on 2 cores vLLM's worker on core 0, the API
server and the clients on core 1) is warmed up until steady, then per concurrency:

1. **Two clients alternating** (mopt's and ``vllm bench serve``, ``--repeats`` times, order
   swapped each repeat), ``--num-requests`` each: per run the client's TTFT/TPOT medians and
   throughput, vLLM's own means for the same requests (histograms scraped before and after),
   the engine's held share of the client's in-flight time (``crosscheck.feed``) and the
   running+waiting gauges sampled every 0.25 s (share of samples below the concurrency).
2. **Consecutive windows** of mopt's load (``--windows`` of ``--window-s`` seconds): the
   throughput of each, their coefficient of variation, each window's starved share.

The machine must be idle (``quiet.require_quiet``); its state is printed with the figures.

    flock /work/cpu.lock .venv/bin/python benchmarks/timing_bed.py --recipe recipes/bed-cpu.yaml \\
        --concurrency 4,16 --out bed.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from client_capacity import VLLM_WORKER, vllm_bench_argv  # noqa: E402
from quiet import add_quiet_args, machine_state, require_quiet  # noqa: E402

from model_optimizer.crosscheck import compare_latency, feed  # noqa: E402
from model_optimizer.engine.placement import client_placed  # noqa: E402
from model_optimizer.httpcall import call, join_url  # noqa: E402
from model_optimizer.load import PromptSource, run_load_sync, summarize  # noqa: E402
from model_optimizer.load.steady import summarize_steady  # noqa: E402
from model_optimizer.recipe import load_recipe  # noqa: E402
from model_optimizer.runner import effective_workload, run_items, serve  # noqa: E402
from model_optimizer.telemetry import parse_metrics  # noqa: E402
from model_optimizer.telemetry.histograms import scrape_histograms, window_delta  # noqa: E402


class GaugeSampler:
    """vLLM's running + waiting gauges every ``interval_s`` on a thread."""

    def __init__(self, url: str, interval_s: float = 0.25) -> None:
        self.url, self.interval_s, self.held = url, interval_s, []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                page = parse_metrics(call("GET", self.url, deadline_s=2.0).text)
                self.held.append((page["num_requests_running"] or 0)
                                 + (page["num_requests_waiting"] or 0))
            except Exception:  # noqa: BLE001 - a missed sample is skipped
                pass
            self._stop.wait(self.interval_s)

    def __enter__(self) -> GaugeSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def starved(self, intended: int) -> float | None:
        """Share of samples below ``intended`` while the server held any request."""
        busy = [i for i, n in enumerate(self.held) if n > 0]
        if not busy:
            return None
        inside = self.held[busy[0]:busy[-1] + 1]
        return sum(1 for n in inside if n < intended) / len(inside)


def mopt_workload(args: argparse.Namespace, concurrency: int, **extra) -> dict:
    return {"endpoint": "completions", "prompt_tokens": args.prompt_tokens,
            "output_tokens": args.output_tokens, "concurrency": concurrency,
            "request_rate": "inf", "num_requests": args.num_requests, "duration_s": None,
            "warmup_requests": 0, "request_timeout_s": 600, "seed": 0, **extra}


def run_mopt(args, url, model, concurrency, placement, prompts, **extra) -> dict:
    workload = mopt_workload(args, concurrency, **extra)
    with client_placed(placement):
        result = run_load_sync(url, model, workload, prompts)
    summary = summarize(result.records, result.window_s, output_tokens_expected=None)
    return {"records": result.records, "qps": summary["qps"],
            "ttft_p50_ms": summary["ttft_p50_ms"], "tpot_p50_ms": summary["tpot_p50_ms"],
            "tpot_unmeasurable": summary["tpot_unmeasurable"], "completed": summary["completed"],
            "client_lag_p99_ms": (result.client_lag or {}).get("client_lag_p99_ms"),
            "warmup": result.warmup}


def run_vllm(args, url, model, concurrency, placement) -> dict:
    argv = vllm_bench_argv(url, model, args.model_dir, input_len=args.prompt_tokens,
                           output_len=args.output_tokens, num_prompts=args.num_requests,
                           concurrency=concurrency, request_rate=None, served_model_name=model)
    argv += ["--num-warmups", "0"]  # the server is warm; the histograms hold these alone
    cores = ",".join(str(c) for c in (placement.client or ()))
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "r.json"
        prefix = ["taskset", "-c", cores] if cores else []
        subprocess.run([*prefix, sys.executable, "-c", VLLM_WORKER, json.dumps([argv]),
                        str(out)], check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=1800)
        result = json.loads(out.read_text())[0]
    return {"qps": result["request_throughput"], "ttft_p50_ms": result["median_ttft_ms"],
            "tpot_p50_ms": result["median_tpot_ms"], "completed": result["completed"],
            "in_flight_s": result["completed"] * result["mean_e2el_ms"] / 1000.0}


def one_run(client: str, args, engine, model, concurrency, prompts) -> dict:
    metrics_url = join_url(engine.base_url, "/metrics")
    before = scrape_histograms(metrics_url)
    with GaugeSampler(metrics_url) as gauges:
        if client == "mopt":
            found = run_mopt(args, engine.base_url, model, concurrency, engine.placement,
                             prompts)
        else:
            found = run_vllm(args, engine.base_url, model, concurrency, engine.placement)
    server = window_delta(before, scrape_histograms(metrics_url))
    records = found.pop("records", None)
    if records is not None:
        check = compare_latency(records, server)
        fed = feed(records, server, [], None, None, concurrency)
    else:  # vllm bench: its in-flight time from its mean E2E
        check = None
        held = server["inference"].total + server["queue"].total
        fed = {"held_share": min(held / found["in_flight_s"], 1.0)}
    found.update(client=client, gauge_starved=gauges.starved(concurrency),
                 starved_share=1.0 - fed["held_share"] if fed["held_share"] is not None
                 else None,
                 server_ttft_mean_ms=server["ttft"].mean() * 1000,
                 server_tpot_mean_ms=server["tpot"].mean() * 1000,
                 server_requests=server["e2e"].count,
                 check={k: v["verdict"] for k, v in check["figures"].items()} if check else None)
    return found


def windows(args, engine, loaded, concurrency) -> dict:
    """Consecutive mopt windows of ``window_s`` seconds with the recipe's own workload (its
    length mix): throughput CV and starved shares."""
    workload = effective_workload(loaded.spec, {
        "duration_s": args.window_s, "num_requests": None, "concurrency": concurrency,
        "warmup_requests": 0, "warmup_steady_max_s": None})
    items = run_items(loaded.spec, workload, args.model_dir, loaded.base_dir)
    rates, starved = [], []
    for _ in range(args.windows):
        before = scrape_histograms(join_url(engine.base_url, "/metrics"))
        with client_placed(engine.placement):
            result = run_load_sync(engine.base_url, loaded.spec.model.served_name, workload,
                                   items)
        server = window_delta(before, scrape_histograms(join_url(engine.base_url, "/metrics")))
        fed = feed(result.records, server, [], None, None, concurrency)
        rates.append(summarize_steady(result.records, result.window_s,
                                      close=result.closed_at)["qps"])
        starved.append(fed["starved_share"])
    items.close()
    mean = statistics.mean(rates)
    return {"rates": [round(r, 2) for r in rates],
            "cv": statistics.stdev(rates) / mean if len(rates) > 1 else None,
            "starved": [round(s, 3) for s in starved if s is not None]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", default="recipes/bed-cpu.yaml")
    parser.add_argument("--concurrency", default="4,16")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--num-requests", type=int, default=200)
    parser.add_argument("--windows", type=int, default=6)
    parser.add_argument("--window-s", type=float, default=10.0)
    parser.add_argument("--out", type=Path)
    add_quiet_args(parser)
    args = parser.parse_args()
    state = require_quiet(args)
    loaded = load_recipe(Path(args.recipe).resolve())
    spec = loaded.spec
    args.prompt_tokens = spec.workload.prompt_tokens
    args.output_tokens = spec.workload.output_tokens
    args.model_dir = str((Path(args.recipe).resolve().parent / spec.model.path).resolve())
    model = spec.model.served_name
    prompts = PromptSource(args.model_dir, args.prompt_tokens, 0, 0).make(2000)
    report = {"recipe": args.recipe, "machine_before": state, "levels": {}}
    with serve(loaded, tempfile.mkdtemp(prefix="mopt-bed-")) as (engine, outcome):
        if engine is None:
            sys.exit(f"the server did not start: {outcome.failure}")
        first = max(int(c) for c in args.concurrency.split(","))
        warm = run_mopt(args, engine.base_url, model, first, engine.placement, prompts,
                        num_requests=None, duration_s=2, warmup_steady_max_s=120)
        report["warmup"] = warm["warmup"]
        print(f"warm-up: {warm['warmup']}", flush=True)
        for concurrency in (int(c) for c in args.concurrency.split(",")):
            runs = []
            for repeat in range(args.repeats):
                for client in (("mopt", "vllm") if repeat % 2 == 0 else ("vllm", "mopt")):
                    runs.append(one_run(client, args, engine, model, concurrency, prompts))
                    print(json.dumps({k: v for k, v in runs[-1].items() if k != "warmup"},
                                     default=str), flush=True)
            level = {"runs": runs, "windows": windows(args, engine, loaded, concurrency)}
            print(f"c={concurrency} windows: {level['windows']}", flush=True)
            report["levels"][concurrency] = level
    report["machine_after"] = machine_state(seconds=1.0)
    if args.out:
        args.out.write_text(json.dumps(report, indent=1, default=str))


if __name__ == "__main__":
    main()
