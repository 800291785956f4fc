"""A real trace replayed on the real engine, with vLLM's prefix cache on and off, side by side.

Each round runs ``mopt apply`` twice on the tiny CPU recipe with ``workload.trace`` set to a
trace with multi-turn sessions (default ``examples/traces/sessions.jsonl``), once with
``engine.enable_prefix_caching`` on and once off (the order alternates by round, so a slow
minute of the shared machine does not always land on the same side). Every run prints what
its archive says: the trace's own rate against the rate actually sent, how late the sends
were, the prefix cache's hit rate from vLLM's counters, the cached prompt share per class
from the responses (``--enable-prompt-tokens-details``), and TTFT p50. At the end, per side:
the median and range over rounds. One launch per run: about 1 minute each.
Figures: docs/benchmarks/trace-replay.md.

    .venv/bin/python benchmarks/trace_replay.py [--rounds 3] [--trace FILE] [--speed 1x]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from quiet import add_quiet_args, require_quiet

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes" / "tiny-cpu.yaml"
MOPT = [sys.executable, "-m", "model_optimizer"]


def apply_once(caching: bool, args, runs: Path) -> dict:
    """One ``mopt apply`` replaying the trace; the figures its archive holds."""
    sets = [f"workload.trace={args.trace.resolve()}", f"workload.trace_speed={args.speed}",
            f"engine.enable_prefix_caching={'true' if caching else 'false'}",
            # a session's later turns carry the conversation so far: over the recipe's 512
            f"engine.max_model_len={args.max_model_len}",
            "engine.extra_args={enable-prompt-tokens-details: true}"]
    argv = [*MOPT, "apply", str(RECIPE), "--runs-dir", str(runs), "--json"]
    for item in sets:
        argv += ["--set", item]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900, check=False)
    if done.returncode not in (0, 4):
        sys.exit(f"mopt apply exited {done.returncode}:\n{done.stderr[-3000:]}")
    summary = json.loads(done.stdout)
    metrics = json.loads((Path(summary["archive"]) / "metrics.json").read_text())
    return figures(caching, metrics, summary["archive"])


def figures(caching: bool, m: dict, archive: str) -> dict:
    """The row this benchmark reports from one run's ``metrics.json``."""
    trace, cache = m.get("trace") or {}, m.get("prefix_cache") or {}
    by_class = {name: row.get("cached_prompt_share")
                for name, row in (m.get("classes") or {}).items()}
    return {"caching": caching, "archive": archive, "completed": m.get("completed"),
            "replayed": trace.get("replayed_requests"), "trace_rps": trace.get("trace_rate_qps"),
            "target_rps": trace.get("target_rate_qps"), "sent_rps": trace.get("replayed_rate_qps"),
            "late_p50_ms": trace.get("send_late_p50_ms"),
            "late_p99_ms": trace.get("send_late_p99_ms"),
            "hit_rate": cache.get("hit_rate"), "queried_tokens": cache.get("queried_tokens"),
            "hit_tokens": cache.get("hit_tokens"),
            "cached_share": m.get("cached_prompt_share"), "cached_share_by_class": by_class,
            "ttft_p50_ms": m.get("ttft_p50_ms"),
            "load_average": m.get("load_average")}


def summarize(rows: list[dict]) -> None:
    """Median and range over rounds of each side's hit rate, sent/trace rate and TTFT p50."""
    for caching in (True, False):
        side = [r for r in rows if r["caching"] is caching]
        for key in ("hit_rate", "sent_rps", "trace_rps", "ttft_p50_ms"):
            values = [r[key] for r in side if r[key] is not None]
            if values:
                print(f"caching {'on ' if caching else 'off'} {key}: median "
                      f"{statistics.median(values):.4g}, range {min(values):.4g}-"
                      f"{max(values):.4g} over {len(values)} runs", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--trace", type=Path,
                        default=ROOT / "examples" / "traces" / "sessions.jsonl")
    parser.add_argument("--speed", default="1x")
    parser.add_argument("--max-model-len", type=int, default=2048,
                        help="the trace's sessions grow past the recipe's 512 tokens")
    parser.add_argument("--runs-dir", type=Path, default=None)
    add_quiet_args(parser)
    args = parser.parse_args()
    print(f"machine before: {require_quiet(args)}", flush=True)  # refuses when busy
    runs = args.runs_dir or Path(tempfile.mkdtemp(prefix="trace-replay-"))
    rows = []
    for number in range(1, args.rounds + 1):
        order = (True, False) if number % 2 else (False, True)
        for caching in order:
            rows.append({"round": number, **apply_once(caching, args, runs)})
            print(json.dumps(rows[-1]), flush=True)
    summarize(rows)
    out = runs / "trace-replay.json"
    out.write_text(json.dumps(rows, indent=1))
    print(f"figures: {out}; load average now {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
