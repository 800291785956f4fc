"""NVML-shaped thermals series for the warm-card tests: the recorded H200 run and series
built in its image (integer degrees, SM clocks in NVML's 15 MHz steps, 0.5 s apart)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

RECORDED = Path(__file__).resolve().parents[3] / "benchmarks" / "gpu_records" / "gpu-thermal.json"
STEP_S = 0.5  # the window's telemetry interval (window.SAMPLE_INTERVAL_S)
T0 = 1_796_402_140.0
#: the recorded H200's SM clock around its mean under a steady load (MHz; 1410-1455 about 1432)
JITTER = (-7, 8, -22, 23, -7, -22, 8, -7, 8, -22, -7, 23)


def recorded() -> dict:
    """A lent H200 idle, under a bf16 matrix load for 60 s, and idle again (2026-12-04)."""
    return json.loads(RECORDED.read_text())


def nvml_row(index: int, temperature: float, clock: float) -> dict:
    """One device's row as ``NvmlProbe.thermals`` gives it (NVML answers integers)."""
    return {"index": index, "temperature_c": int(round(temperature)),
            "sm_clock_mhz": int(15 * round(clock / 15)), "mem_clock_mhz": 2619,
            "power_w": 650.0, "gpu_busy_pct": 100}


def series(seconds: float, temperature: Callable[[float], float],
           clock: Callable[[float], float], devices: int = 1, start: float = T0,
           jitter: bool = True) -> list[dict]:
    """Telemetry samples (``t`` and ``gpu_thermals``) every 0.5 s for ``seconds``; the
    curves take the seconds since ``start``."""
    samples = []
    for step in range(int(seconds / STEP_S) + 1):
        offset = step * STEP_S
        wobble = JITTER[step % len(JITTER)] if jitter else 0
        samples.append({"t": start + offset, "gpu_thermals": [
            nvml_row(index, temperature(offset), clock(offset) + wobble)
            for index in range(devices)]})
    return samples


def cold_h100(seconds: float = 120.0, start: float = T0) -> list[dict]:
    """A cold H100 put to work: 35 C rising towards 60 C (most of it in the first minute),
    the SM clock boosting at 1980 MHz and settling to 1755 as it heats."""
    return series(seconds, lambda t: 35 + 25 * (1 - math.exp(-t / 20)),
                  lambda t: 1755 + 225 * math.exp(-t / 15), start=start)


def steady_card(seconds: float = 60.0, start: float = T0, clock: float = 1432,
                devices: int = 1, jitter: bool = True) -> list[dict]:
    """A warm card: 62-63 C, the SM clock flickering about ``clock`` as the H200's did
    (``jitter``), or holding it."""
    return series(seconds, lambda t: 62.4 + 0.3 * math.sin(t), lambda t: clock,
                  devices=devices, start=start, jitter=jitter)


def throttling_card(seconds: float = 60.0, drop_at: float = 30.0,
                    start: float = T0) -> list[dict]:
    """A hot card (84 C) at 1980 MHz that throttles to 1755 MHz at ``drop_at`` and stays
    there."""
    return series(seconds, lambda t: 83.6 if t < drop_at else 84.2,
                  lambda t: 1980 if t < drop_at else 1755, start=start, jitter=False)
