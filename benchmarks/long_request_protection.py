"""Long-request protection, knob by knob: which knob helps the short class's p99 TTFT?

Runs ``recipes/tiny-cpu-mix.yaml`` (90 % short requests, 10 % long ones with 1000-1700
prompt tokens and 256 output tokens, Poisson arrivals, a 16 MiB KV cache) on the real vLLM
CPU server in five configurations, one launch each, alternating in every repeat
(off, budget, threshold, cap, all, off, budget, ...) so a slow minute on a shared machine
hits every configuration alike:

- **off**: one scheduler step may take 2048 tokens, no long-prefill cap, no output cap;
- **budget**: chunked prefill with a 512-token step budget only (``max_num_batched_tokens``);
- **threshold**: 2048-token steps, ``long_prefill_token_threshold: 128`` only;
- **cap**: 2048-token steps, ``max_output_tokens: 64`` only (a server-side output cap);
- **all**: the recipe as shipped (all three).

For every run it prints the per-class p99 TTFT and E2E with their 95 % bootstrap intervals
(over the run's requests in its steady window). After each repeat round it prints, per
configuration and class, the median of the repeats with their range (the noise), the p99 of
all repeats' requests pooled with its 95 % interval, and for each knob the short class's
p99 TTFT ratio to "off" per repeat, judged **outside the noise** only when every repeat of
the knob lies beyond every repeat of "off".

    .venv/bin/python benchmarks/long_request_protection.py [--repeats 3] [--rate 6]
        [--num-requests 150] [--only off,all] [--runs-dir DIR]
    .venv/bin/python benchmarks/long_request_protection.py --summarize DIR [DIR ...]

About 1.5-2 minutes per launch on 2 cores. Archives go to a temp folder unless --runs-dir.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
from pathlib import Path

import yaml

from model_optimizer.load.stats import percentile
from model_optimizer.load.steady import bootstrap_interval, finish_time
from model_optimizer.recipe import load_recipe
from model_optimizer.runner import run_recipe

ROOT = Path(__file__).resolve().parents[1]
UNPROTECTED = {"engine.max_num_batched_tokens": "2048",
               "engine.long_prefill_token_threshold": "null",
               "engine.max_output_tokens": "null"}
KNOBS = {"budget": {"engine.max_num_batched_tokens": "512"},
         "threshold": {"engine.long_prefill_token_threshold": "128"},
         "cap": {"engine.max_output_tokens": "64"}}
CLASSES = ("short", "long")
METRICS = {"ttft": "ttft_s", "e2e": "e2e_s"}


def configurations() -> dict[str, list[str]]:
    """Label -> recipe overrides: off, each knob alone over "off", and the recipe as shipped."""
    configs = {"off": [f"{k}={v}" for k, v in UNPROTECTED.items()]}
    for label, knob in KNOBS.items():
        configs[label] = [f"{k}={v}" for k, v in {**UNPROTECTED, **knob}.items()]
    configs["all"] = []
    return configs


def class_samples(archive: Path, metrics: dict) -> dict[str, dict[str, list[float]]]:
    """Class -> metric -> seconds of the measured, completed requests in the steady window."""
    steady = metrics.get("steady")
    out = {cls: {name: [] for name in METRICS} for cls in CLASSES}
    for line in (archive / "requests.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["warmup"] or not record["ok"] or record["request_class"] not in out:
            continue
        if steady and not steady["start"] < (finish_time(record) or 0) <= steady["end"]:
            continue
        for name, key in METRICS.items():
            if record[key] is not None:
                out[record["request_class"]][name].append(record[key])
    return out


def p99_text(values: list[float]) -> str:
    """``p99 [low, high]`` in ms (95 % percentile bootstrap), ``n/a`` without samples."""
    if not values:
        return "n/a"
    bounds = bootstrap_interval(values, 99, rng=random.Random(0))
    span = f" [{bounds[0] * 1e3:.0f}, {bounds[1] * 1e3:.0f}]" if bounds else ""
    return f"{percentile(values, 99) * 1e3:.0f}{span}"


def measure(label: str, overrides: list[str], runs: Path) -> dict:
    """One launch and archived run; its per-class samples and capped counts."""
    loaded = load_recipe(ROOT / "recipes" / "tiny-cpu-mix.yaml", overrides)
    outcome = run_recipe(loaded, runs)
    if not outcome.ok:
        raise SystemExit(f"{label}: run {outcome.run_id} failed: {outcome.status}")
    return archived(label, outcome.archive, outcome.metrics)


def archived(label: str, archive: Path, metrics: dict) -> dict:
    """A run's per-class samples and capped counts, printed as one line."""
    samples = class_samples(archive, metrics)
    classes = metrics["classes"]
    print(f"{label:9} {archive.name}: " + "; ".join(
        f"{cls} n={len(samples[cls]['ttft'])} TTFT p99 {p99_text(samples[cls]['ttft'])} ms, "
        f"E2E p99 {p99_text(samples[cls]['e2e'])} ms, capped {classes[cls]['capped_requests']}"
        for cls in CLASSES), flush=True)
    return {"samples": samples, "capped": {c: classes[c]["capped_requests"] for c in CLASSES},
            "requests": {c: classes[c]["requests"] for c in CLASSES}}


def main() -> None:
    """Alternate the configurations' launches, printing the comparison after every round."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rate", type=float, default=6.0, help="Poisson requests/s")
    parser.add_argument("--num-requests", type=int, default=100)
    parser.add_argument("--only", default=None, help="comma-separated subset of "
                        "off,budget,threshold,cap,all (default: all five)")
    parser.add_argument("--runs-dir", type=Path, default=None)
    parser.add_argument("--summarize", type=Path, nargs="+", default=None, metavar="DIR",
                        help="launch nothing: summarize the runs archived in these --runs-dir "
                        "folders (several invocations' repeats together)")
    args = parser.parse_args()
    configs = configurations()
    if args.summarize:
        print_summary(from_archives(args.summarize, configs))
        return
    if args.only:
        configs = {label: configs[label] for label in args.only.split(",")}
    runs = args.runs_dir or Path(tempfile.mkdtemp(prefix="mopt-protection-"))
    load = [f"workload.request_rate={args.rate}", f"workload.num_requests={args.num_requests}"]
    results: dict[str, list[dict]] = {label: [] for label in configs}
    for repeat in range(args.repeats):
        for label, overrides in configs.items():
            print(f"repeat {repeat + 1}/{args.repeats}: {label} ...", flush=True)
            results[label].append(measure(label, overrides + load, runs))
        print_summary(results)


def from_archives(folders: list[Path], configs: dict[str, list[str]]) -> dict[str, list[dict]]:
    """Every completed run in ``folders``, in time order, under the label its knobs match."""
    knobs = ("max_num_batched_tokens", "long_prefill_token_threshold", "max_output_tokens")
    labels = {}
    for label, overrides in configs.items():
        engine = load_recipe(ROOT / "recipes" / "tiny-cpu-mix.yaml", overrides).resolved["engine"]
        labels[tuple(engine.get(k) for k in knobs)] = label
    results: dict[str, list[dict]] = {label: [] for label in configs}
    runs = sorted((p for folder in folders for p in folder.iterdir() if (p / "metrics.json")
                   .exists()), key=lambda p: p.name)
    for run in runs:
        engine = yaml.safe_load((run / "recipe.resolved.yaml").read_text())["engine"]
        label = labels.get(tuple(engine.get(k) for k in knobs))
        if label is not None:
            results[label].append(archived(label, run, json.loads(
                (run / "metrics.json").read_text())))
    return results


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.0f}"


def print_summary(results: dict[str, list[dict]]) -> None:
    """Per configuration and class: repeats' median and range, pooled p99 with its interval."""
    rounds = min(len(rows) for rows in results.values())
    print(f"\nafter {rounds} repeat(s): p99 in ms; median (range over repeats) | pooled p99 "
          "[95% bootstrap interval]")
    print("| config | class | TTFT p99 | TTFT p99 pooled | E2E p99 | E2E p99 pooled | capped |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for label, rows in results.items():
        for cls in CLASSES:
            cells = []
            for name in METRICS:
                per_run = [percentile(r["samples"][cls][name], 99) for r in rows
                           if r["samples"][cls][name]]
                pooled = [v for r in rows for v in r["samples"][cls][name]]
                cells.append(f"{_ms(statistics.median(per_run))} ({_ms(min(per_run))}-"
                             f"{_ms(max(per_run))})" if per_run else "n/a")
                cells.append(p99_text(pooled))
            capped = sum(r["capped"][cls] for r in rows)
            asked = sum(r["requests"][cls] for r in rows)
            print(f"| {label} | {cls} | {' | '.join(cells)} | {capped} of {asked} |")
    print_verdicts(results)


def print_verdicts(results: dict[str, list[dict]]) -> None:
    """Each configuration's short p99 TTFT against "off": per-repeat ratios and the verdict."""
    if "off" not in results:
        return
    off = [percentile(r["samples"]["short"]["ttft"], 99) for r in results["off"]]
    print()
    for label, rows in results.items():
        if label == "off":
            continue
        mine = [percentile(r["samples"]["short"]["ttft"], 99) for r in rows]
        ratios = [m / o for m, o in zip(mine, off, strict=False)]
        if min(len(mine), len(off)) < 2:
            verdict = "one repeat: no estimate of the noise yet"
        elif max(mine) < min(off):
            verdict = "lower than every 'off' repeat: an effect outside the noise"
        elif min(mine) > max(off):
            verdict = "higher than every 'off' repeat: worse, outside the noise"
        else:
            verdict = "overlaps the 'off' repeats: no effect outside the noise"
        print(f"short p99 TTFT {label}/off per repeat: "
              f"{', '.join(f'{r:.2f}' for r in ratios)} (median "
              f"{statistics.median(ratios):.2f}); {verdict}")


if __name__ == "__main__":
    main()
