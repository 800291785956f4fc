"""Every hostile-server fault against ``mopt bench --url``, run as a subprocess (issue 24).

For each fault a mock server (``python -m model_optimizer.load.mock_server --mock-hostile
FAULT``, its own process, loopback only) is started and ``mopt bench --url`` is run against
it. Printed per fault: exit code, seconds to exit, peak RSS of the mopt process (psutil,
sampled every 20 ms), what was archived (status and classified cause) and whether anything
false was counted as success (an ok request where the fault allows none, or an ok request
whose output tokens differ from those asked), and whether a secret reached the archive or
the terminal. Goal per fault: under 15 s, under 300 MB RSS, classified, nothing false
counted, no secret shown.

Usage: ``python benchmarks/hostile_servers.py [--faults a,b] [--repeats N]``
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
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO_ROOT = Path(__file__).resolve().parents[1]
KEY = "plainkey-hostile-42"
ASKED = 8
TIME_GOAL_S, RSS_GOAL_MB, CAP_S = 15.0, 300.0, 90.0


@dataclass
class Fault:
    """One fault: the mock's ``--mock-hostile`` name, whether a true success is possible."""

    name: str
    hostile: str | None
    success_possible: bool
    url_tail: str = ""
    api_key: bool = False


FAULTS = [
    Fault("none (healthy mock: the baseline)", None, True),
    Fault("slow /v1/models", "slow_models", False),
    Fault("slow /tokenize", "slow_tokenize", False),
    Fault("slow /metrics", "slow_metrics", True),
    Fault("endless SSE event", "endless_event", False),
    Fault("300 MB error body", "huge_error", False),
    Fault("completion_tokens 1e18", "tokens_1e18", False),
    Fault("completion_tokens 1e400", "tokens_1e400", False),
    Fault("[DONE] before any chunk", "done_first", False),
    Fault("events after [DONE]", "after_done", True),
    Fault("Bearer key echoed", "echo_key", False, api_key=True),
    Fault("dies mid-stream", "die_mid_stream", False),
    Fault("credentials in --url", None, True, url_tail=f"?api_key=q-{KEY}"),
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(fault: Fault, port: int) -> subprocess.Popen:
    argv = [sys.executable, "-m", "model_optimizer.load.mock_server", "--port", str(port)]
    if fault.hostile:
        argv += ["--mock-hostile", fault.hostile]
    server = subprocess.Popen(argv, cwd=REPO_ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return server
        except OSError:
            time.sleep(0.1)
    server.kill()
    raise RuntimeError(f"mock server for {fault.name} did not listen")


def run_bench(fault: Fault, port: int, runs: Path) -> tuple[int, float, float, str]:
    """Exit code, seconds, peak RSS (MB) and the terminal text of one bench."""
    userinfo = f"alice:pw-{KEY}@" if fault.url_tail else ""
    url = f"http://{userinfo}127.0.0.1:{port}/{fault.url_tail}"
    argv = [sys.executable, "-m", "model_optimizer", "bench", "--url", url,
            "--num-requests", "8", "--concurrency", "2", "--output-tokens", str(ASKED),
            "--prompt-tokens", "16", "--warmup", "1", "--runs-dir", str(runs)]
    env = {**os.environ, "MOPT_BENCH_KEY": KEY}
    if fault.api_key:
        argv += ["--api-key-env", "MOPT_BENCH_KEY"]
    started = time.monotonic()
    with tempfile.TemporaryFile() as out:
        bench = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=out, stderr=out)
        peak = _watch(bench, started)
        seconds = time.monotonic() - started
        out.seek(0)
        return bench.returncode, seconds, peak, out.read().decode(errors="replace")


def _watch(bench: subprocess.Popen, started: float) -> float:
    """Sample the RSS of ``bench`` until it exits (killed after ``CAP_S``); the peak in MB."""
    peak = 0.0
    proc = psutil.Process(bench.pid)
    while bench.poll() is None and time.monotonic() - started < CAP_S:
        with contextlib.suppress(psutil.Error):
            peak = max(peak, proc.memory_info().rss / 2**20)
        time.sleep(0.02)
    if bench.poll() is None:
        bench.kill()
    bench.wait()
    return peak


def archived(runs: Path) -> tuple[str, list[dict], str]:
    """Status (with its class), measured records and every archived text."""
    folders = [p for p in runs.iterdir() if p.is_dir()] if runs.exists() else []
    if not folders:
        return "nothing archived", [], ""
    folder = folders[0]
    status = json.loads((folder / "status.json").read_text()).get("status", "?")
    records = []
    requests = folder / "requests.jsonl"
    if requests.exists():
        records = [r for r in map(json.loads, requests.read_text().splitlines())
                   if not r["warmup"]]
    texts = "\n".join(p.read_text(errors="replace") for p in runs.rglob("*")
                      if p.is_file() and p.suffix != ".sqlite")
    return status, records, texts


def one(fault: Fault) -> dict:
    port = free_port()
    server = start_server(fault, port)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            runs = Path(tmp) / "runs"
            code, seconds, peak, text = run_bench(fault, port, runs)
            status, records, texts = archived(runs)
    finally:
        server.kill()
        server.wait()
    ok = [r for r in records if r["ok"]]
    false = (bool(ok) and not fault.success_possible) or any(
        r["output_tokens"] != ASKED for r in ok)
    classified = (code == 2 and "error" in text.lower()) or status.startswith(("ok", "failed:"))
    leaked = KEY in texts or KEY in text
    return {"fault": fault.name, "exit": code, "seconds": seconds, "peak_rss_mb": peak,
            "archived": status, "ok_requests": f"{len(ok)}/{len(records)}",
            "false_success": false, "secret_shown": leaked, "classified": classified,
            "met": (seconds < TIME_GOAL_S and peak < RSS_GOAL_MB and classified
                    and not false and not leaked),
            "cause": next((r["error"][:110] for r in records if r["error"]), "")
            or _cause(text, code)}


def _cause(text: str, code: int) -> str:
    """The line of the terminal text that says why (usage errors, failures)."""
    for line in text.splitlines():
        if line.startswith(("Error", "failed:")) or "does not answer" in line:
            return line.strip()[:110]
    return "" if code == 0 else text.strip().splitlines()[-1][:110] if text.strip() else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--faults", default="", help="comma-separated hostile names")
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    chosen = [f for f in FAULTS if not args.faults
              or (f.hostile or ("url" if f.url_tail else "none")) in args.faults.split(",")]
    print(f"load average: {os.getloadavg()}", flush=True)
    rows = []
    for fault in chosen:
        for _ in range(args.repeats):
            rows.append(one(fault))
            print(f"  {fault.name}: {rows[-1]['seconds']:.1f} s", file=sys.stderr, flush=True)
    base = [r["seconds"] for r in rows if r["fault"].startswith("none")]
    base_s = min(base) if base else 0.0  # mopt's own start-up and a healthy bench
    print("| fault | exit | s | s over baseline | peak RSS MB | archived | ok/measured "
          "| false success | secret shown | goal |")
    print("|---|---:|---:|---:|---:|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['fault']} | {r['exit']} | {r['seconds']:.1f} "
              f"| {r['seconds'] - base_s:+.1f} | {r['peak_rss_mb']:.0f} "
              f"| {r['archived']} | {r['ok_requests']} | {'YES' if r['false_success'] else 'no'}"
              f" | {'YES' if r['secret_shown'] else 'no'} | {'met' if r['met'] else 'MISSED'} |")
    for r in rows:
        if r["cause"]:
            print(f"- {r['fault']}: {r['cause']}")
    print(f"load average: {os.getloadavg()}")
    print(f"verdict: {sum(r['met'] for r in rows)}/{len(rows)} faults met the goal")


if __name__ == "__main__":
    main()
