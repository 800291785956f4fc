"""Steady-state windows and their intervals, on simulated closed loops with known rates."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from model_optimizer.load.client import run_load_sync
from model_optimizer.load.mock_server import MockServer
from model_optimizer.load.stats import percentile, summarize
from model_optimizer.load.steady import (
    batch_means,
    bootstrap_interval,
    qps_precision,
    ramp_end,
    summarize_steady,
    t_quantile,
)

T0 = 1_000.0


def closed_loop(concurrency: int, close_after_s: float, seed: int = 0,
                mean_s: float = 1.0, spread_s: float = 0.4) -> tuple[list[dict], float]:
    """Records of a simulated closed loop: each slot sends again when its request ends,
    until ``close_after_s``; durations uniform in mean +- spread. Returns (records, close)."""
    rng = random.Random(seed)
    close = T0 + close_after_s
    records = []
    for slot in range(concurrency):
        sent = T0
        while sent <= close:
            duration = rng.uniform(mean_s - spread_s, mean_s + spread_s)
            records.append({"index": len(records), "warmup": False, "sent_at": sent,
                            "ttft_s": duration / 4, "e2e_s": duration,
                            "finished_at": sent + duration, "itl_s": [],
                            "output_tokens": 8, "prompt_tokens": 16, "ok": True,
                            "slot": slot})
            sent += duration
    return records, close


def test_ramp_ends_when_the_first_wave_has_finished():
    records, close = closed_loop(4, 30)
    first_wave = [r for r in records if r["sent_at"] == T0]
    assert len(first_wave) == 4
    assert ramp_end(records) == max(r["finished_at"] for r in first_wave)


def test_steady_rates_count_only_completions_inside_the_window():
    records, close = closed_loop(8, 40)
    summary = summarize_steady(records, 45.0, close=close)
    steady = summary["steady"]
    start, end = steady["start"], steady["end"]
    assert end == close and start == ramp_end(records)
    inside = [r for r in records if start < r["finished_at"] <= end]
    assert steady["completed"] == len(inside)
    assert summary["qps"] == pytest.approx(len(inside) / (end - start))
    assert summary["output_tok_s"] == pytest.approx(8 * len(inside) / (end - start))
    # the whole-window rate stays available, and it differs: it counts ramp and drain
    whole = summarize(records, 45.0)
    assert summary["whole_window"]["qps"] == whole["qps"]
    # 8 slots of 1 s on average: the true rate is 8 req/s, inside the interval
    qps = summary["intervals"]["qps"]
    assert qps["low"] < 8.0 < qps["high"]
    assert qps["half_width"] > 0 and "batch means" in qps["method"]


def test_drain_requests_count_for_latency_not_for_throughput():
    records, close = closed_loop(4, 20)
    slow = {"index": 999, "warmup": False, "sent_at": close - 0.1, "ttft_s": 50.0,
            "e2e_s": 60.0, "finished_at": close + 59.9, "itl_s": [], "output_tokens": 8,
            "prompt_tokens": 16, "ok": True}
    summary = summarize_steady([*records, slow], 80.0, close=close)
    steady = summary["steady"]
    drained = [r for r in [*records, slow]
               if steady["start"] <= r["sent_at"] <= close < r["finished_at"]]
    assert steady["drain_requests"] == len(drained) >= 1
    assert summary["e2e_p99_ms"] > 1000 * 2.0  # the slow drain request is in the latencies
    assert summary["ttft_p99_ms"] == pytest.approx(
        1000 * percentile([r["ttft_s"] for r in records + [slow]
                           if steady["start"] <= r["sent_at"] <= close], 99))
    inside = [r for r in records if steady["start"] < r["finished_at"] <= close]
    assert steady["completed"] == len(inside)  # ... and not in the completions


def test_ramp_requests_are_left_out_of_latency():
    records, close = closed_loop(4, 20)
    for record in records:
        if record["sent_at"] == T0:  # the first wave queued behind a cold server
            record["ttft_s"] = 30.0
    summary = summarize_steady(records, 25.0, close=close)
    assert summary["ttft_p99_ms"] < 1000.0
    assert summarize(records, 25.0)["ttft_p99_ms"] > 1000.0


def test_slo_verdict_uses_the_steady_latencies():
    records, close = closed_loop(4, 20)
    for record in records:
        if record["sent_at"] == T0:
            record["ttft_s"] = 30.0
    slo = {"ttft_p99_ms": 5000}
    assert summarize(records, 25.0, slo)["slo_met"] is False
    assert summarize_steady(records, 25.0, slo, close=close)["slo_met"] is True


def test_interval_narrows_with_a_longer_window():
    short = summarize_steady(*_window(8, 12))["intervals"]["qps"]["half_width"]
    long = summarize_steady(*_window(8, 120))["intervals"]["qps"]["half_width"]
    assert long < short / 2


def _window(concurrency: int, seconds: float) -> tuple:
    records, close = closed_loop(concurrency, seconds, seed=3)
    return records, seconds + 2, None, None, close


def test_too_short_a_window_keeps_whole_window_figures():
    records, close = closed_loop(8, 0.5)  # one wave: nothing steady
    summary = summarize_steady(records, 2.0, close=close)
    assert summary["steady"] is None and summary["intervals"] is None
    assert summary["qps"] == summarize(records, 2.0)["qps"]


def test_interrupted_runs_claim_no_steady_state():
    records, close = closed_loop(4, 20)
    assert summarize_steady(records, 20.0, close=close, steady=False)["steady"] is None


def test_batch_means_of_a_perfectly_regular_series_keeps_the_counting_resolution():
    finishes = [0.05 + 0.1 * i for i in range(40)]  # exactly 10 per second, 4 per batch
    rate, half_width, k = batch_means(finishes, [1.0] * 40, 0.0, 4.0, batches=10)
    assert rate == pytest.approx(10.0) and k == 10
    # equal counts: no spread, but each batch rate is known only to 1 completion / 0.4 s
    assert half_width == pytest.approx(t_quantile(9) * math.sqrt((1 / 0.4) ** 2 / 12 / 10))


def test_batch_means_by_hand():
    # 4 sub-windows of 1 s with 4, 6, 4, 6 completions: rates 4, 6, 4, 6
    finishes = [second + offset for second, count in enumerate((4, 6, 4, 6))
                for offset in [(i + 0.5) / count for i in range(count)]]
    rate, half_width, k = batch_means(finishes, [1.0] * 20, 0.0, 4.0, batches=4)
    assert (rate, k) == (5.0, 4)
    assert half_width == pytest.approx(t_quantile(3) * statistics.stdev([4, 6, 4, 6]) / 2)
    assert t_quantile(3) == pytest.approx(3.182) and t_quantile(500) == 1.96
    # fewer than 3 batches: a rate, no interval
    assert batch_means(finishes[:8], [1.0] * 8, 0.0, 4.0)[1:] == (None, 2)


def test_bootstrap_interval_brackets_the_percentile_and_is_seeded():
    rng = random.Random(5)
    values = [rng.lognormvariate(0, 0.5) for _ in range(300)]
    low, high = bootstrap_interval(values, 50)
    assert low < percentile(values, 50) < high
    assert (low, high) == bootstrap_interval(values, 50)
    assert bootstrap_interval(values[:5], 50) is None


def test_qps_precision_improves_as_the_window_grows():
    records, _ = closed_loop(8, 200, seed=9)
    early = qps_precision([r for r in records if r["finished_at"] <= T0 + 10], T0 + 10)
    late = qps_precision(records, T0 + 200)
    assert early is not None and late is not None and late < early


def test_client_stops_once_the_target_precision_is_reached():
    workload = {"endpoint": "completions", "prompt_tokens": 8, "output_tokens": 4,
                "shared_prefix_tokens": 0, "concurrency": 4, "request_rate": "inf",
                "num_requests": None, "duration_s": 1.0, "target_half_width": 0.5,
                "max_duration_s": 30.0, "warmup_requests": 0, "request_timeout_s": 10.0,
                "seed": 0}
    with MockServer(ttft_s=0.01, itl_s=0.005) as server:
        result = run_load_sync(server.url, "mock-model", workload, ["a b c"] * 8)
    sent_for = result.closed_at - result.window_start
    assert 1.0 <= sent_for < 10.0  # precise enough long before the 30 s cap
    summary = summarize_steady(result.records, result.window_s, close=result.closed_at)
    assert summary["intervals"]["qps"]["half_width"] <= 0.5 * summary["qps"] * 1.5


def test_client_precision_target_is_capped():
    workload = {"endpoint": "completions", "prompt_tokens": 8, "output_tokens": 4,
                "shared_prefix_tokens": 0, "concurrency": 2, "request_rate": "inf",
                "num_requests": None, "duration_s": 0.5, "target_half_width": 1e-9,
                "max_duration_s": 1.5, "warmup_requests": 0, "request_timeout_s": 10.0,
                "seed": 0}
    with MockServer(ttft_s=0.01, itl_s=0.005) as server:
        result = run_load_sync(server.url, "mock-model", workload, ["a b c"] * 8)
    assert 1.5 <= result.closed_at - result.window_start < 2.5
