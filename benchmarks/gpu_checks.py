"""GPU checks that need only PyTorch and NVML (no vLLM): what `gpu_probe.py --torch` runs.

Each check exercises mopt's own code on a real card and returns JSON-ready figures:

- ``thermal_run``: NVML thermals (temperature, SM/memory clocks, power, busy) sampled by
  ``NvmlProbe.thermals`` every 0.5 s on an idle card, under a bf16 matrix-product load and
  after it, with the achieved TFLOP/s per second of load: the cold-to-warm curve that the
  warm-card check (``telemetry.thermal``) is tested on, and when that check first called
  the loaded card steady (``card_steady_after_s``).
- ``oom_check``: a real CUDA out-of-memory in a child process, its message classified by
  ``engine.classify`` (the class a vLLM start that runs out of memory gets).
- ``bandwidth_check``: device-to-device copy bandwidth against the plan's accelerator row.
- ``two_processes``: two processes on one card, each capped at a memory fraction (the CPU
  stand-in for two vLLM instances' ``gpu_memory_utilization`` shares): NVML's per-PID memory
  for each, and each one's matrix throughput alone and side by side (time-slicing).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from model_optimizer.telemetry import NvmlProbe  # noqa: E402
from model_optimizer.telemetry.thermal import RULE, card_steady, samples_of  # noqa: E402

MATMUL_N = 8192


class _ThermalSampler:
    """NvmlProbe.thermals every ``interval_s`` on a thread, stamped with time.time()."""

    def __init__(self, probe: NvmlProbe, interval_s: float = 0.5) -> None:
        self.probe, self.interval_s = probe, interval_s
        self.series: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            rows = self.probe.thermals()
            if rows:
                self.series.append({"t": round(time.time(), 3), **rows[0]})
            self._stop.wait(self.interval_s)

    def __enter__(self) -> _ThermalSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _matmul_seconds(seconds: float) -> list[dict[str, float]]:
    """bf16 products of N x N for ``seconds``; TFLOP/s per ~1 s slice, stamped."""
    import torch

    a = torch.randn(MATMUL_N, MATMUL_N, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(MATMUL_N, MATMUL_N, device="cuda", dtype=torch.bfloat16)
    flop = 2 * MATMUL_N**3
    slices, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        start, count = time.monotonic(), 0
        while time.monotonic() - start < 1.0:
            for _ in range(10):
                a @ b
            torch.cuda.synchronize()
            count += 10
        spent = time.monotonic() - start
        slices.append({"t": round(time.time(), 3), "tflops": round(flop * count / spent / 1e12,
                                                                   1)})
    return slices


def thermal_run(load_s: float = 60.0, idle_s: float = 5.0) -> dict[str, Any]:
    """Idle, loaded and cooling NVML series with the load's TFLOP/s per second."""
    with NvmlProbe() as probe, _ThermalSampler(probe) as sampler:
        time.sleep(idle_s)
        started = time.time()
        slices = _matmul_seconds(load_s)
        ended = time.time()
        time.sleep(idle_s)
    return {"load_started": started, "load_ended": ended, "series": sampler.series,
            "tflops": slices, "card_steady_after_s": steady_after(sampler.series, started),
            "card_rule": RULE}


def steady_after(series: list[dict[str, Any]], load_started: float) -> float | None:
    """Seconds into the load when mopt's warm-card rule, judging the samples since the load
    began as the warm-up does, first called the card steady; None if it never did."""
    loaded = [sample for sample in samples_of(series) if sample.t >= load_started]
    for sample in loaded:
        if card_steady(loaded, sample.t).steady:
            return round(sample.t - load_started, 1)
    return None


OOM_CHILD = ("import torch\n"
             "total = torch.cuda.get_device_properties(0).total_memory\n"
             "x = torch.empty(2 * total, dtype=torch.uint8, device='cuda')\n")


def oom_check() -> dict[str, Any]:
    """A child asks for twice the card; its stderr classified as a failed start would be
    (the stderr is kept whole: tests/unit/engine/logs/ records it)."""
    done = subprocess.run([sys.executable, "-c", OOM_CHILD], capture_output=True, text=True,
                          timeout=120, check=False)
    found = {"returncode": done.returncode, "stderr": done.stderr[-4000:]}
    try:  # the engine package imports the supervisor, which needs mopt's dependencies
        from model_optimizer.engine.classify import classify_start_failure
    except ImportError as error:
        return {**found, "class": f"not classified here ({error})"}
    failure = classify_start_failure(done.stderr, done.returncode)
    return {**found, "class": failure.kind, "hint": failure.hint}


def bandwidth_check(gib: float = 4.0) -> dict[str, Any]:
    """Device-to-device copy (bytes read + written) against the plan's H200 bandwidth."""
    import torch

    from model_optimizer.plan.accelerators import resolve_hardware

    n = int(gib * 2**30)
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(10):
        dst.copy_(src)
    end.record()
    torch.cuda.synchronize()
    seconds = begin.elapsed_time(end) / 1000 / 10
    measured = 2 * n / seconds / 1e9
    table = resolve_hardware({"accelerator": "H200"}).bandwidth_gbps
    return {"copy_gbps": round(measured), "plan_gbps": table,
            "measured_over_plan": round(measured / table, 3)}


WORKER = ("import sys, time, torch\n"
          "fraction, seconds = float(sys.argv[1]), float(sys.argv[2])\n"
          "torch.cuda.set_per_process_memory_fraction(fraction)\n"
          "total = torch.cuda.get_device_properties(0).total_memory\n"
          "hold = torch.empty(int(total * fraction * 0.8), dtype=torch.uint8, device='cuda')\n"
          "try:\n"
          "    torch.empty(int(total * fraction * 0.5), dtype=torch.uint8, device='cuda')\n"
          "    over = 'allowed'\n"
          "except torch.OutOfMemoryError:\n"
          "    over = 'refused'\n"
          "n = 8192\n"
          "a = torch.randn(n, n, device='cuda', dtype=torch.bfloat16); b = a.clone()\n"
          "print('READY', flush=True); sys.stdin.readline()\n"
          "end, count = time.monotonic() + seconds, 0\n"
          "while time.monotonic() < end:\n"
          "    for _ in range(10):\n"
          "        a @ b\n"
          "    torch.cuda.synchronize(); count += 10\n"
          "print(f'TFLOPS {2 * n**3 * count / seconds / 1e12:.1f} OVER {over}', flush=True)\n")


def _workers(count: int, fraction: float, seconds: float) -> tuple[list[float], dict]:
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(fraction), str(seconds)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
             for _ in range(count)]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().startswith("READY")
    with NvmlProbe() as probe:
        memory = probe.sample({p.pid for p in procs})
        per_pid = {str(p.pid): probe.sample({p.pid})["gpu_proc_mem_bytes"] for p in procs}
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    results = [proc.communicate(timeout=seconds + 60)[0].split() for proc in procs]
    tflops = [float(words[words.index("TFLOPS") + 1]) for words in results]
    over = [words[words.index("OVER") + 1] for words in results]
    return tflops, {"device_used_bytes": memory["gpu_mem_used_bytes"],
                    "both_pids_bytes": memory["gpu_proc_mem_bytes"], "per_pid_bytes": per_pid,
                    "over_fraction": over}


def two_processes(fraction: float = 0.45, seconds: float = 15.0) -> dict[str, Any]:
    """One process alone, then two side by side, each capped at ``fraction`` of the card."""
    alone, alone_memory = _workers(1, fraction, seconds)
    pair, pair_memory = _workers(2, fraction, seconds)
    return {"fraction_each": fraction, "alone_tflops": alone[0], "pair_tflops": pair,
            "pair_sum_over_alone": round(sum(pair) / alone[0], 3),
            "alone_memory": alone_memory, "pair_memory": pair_memory}


def run_all(out_dir: Path | None) -> dict[str, Any]:
    """Every check; each failure recorded as its error, the others still run."""
    report: dict[str, Any] = {}
    for name, check in (("bandwidth", bandwidth_check), ("oom", oom_check),
                        ("two_processes", two_processes), ("thermal", thermal_run)):
        started = time.monotonic()
        try:
            report[name] = check()
        except Exception as error:  # noqa: BLE001 - one failed check must not hide the rest
            report[name] = {"error": f"{type(error).__name__}: {error}"}
        report[name]["elapsed_s"] = round(time.monotonic() - started, 1)
        if out_dir is not None:
            (out_dir / f"gpu-{name}.json").write_text(json.dumps(report[name], indent=1))
    return report


if __name__ == "__main__":
    target = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
    print(json.dumps({k: {kk: vv for kk, vv in v.items() if kk not in ("series", "tflops")}
                      for k, v in run_all(target).items()}, indent=1, default=str))
