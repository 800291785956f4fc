"""The background sampler against a fake /metrics server and this test process."""

from __future__ import annotations

import itertools
import json
import os
import threading
import time

import pytest

from model_optimizer.telemetry import sampler as sampler_module
from model_optimizer.telemetry.memory import NvmlProbe
from model_optimizer.telemetry.sampler import (
    SAMPLE_KEYS,
    TelemetrySampler,
    compute_peaks,
    counter_increase,
)

INTERVAL_S = 0.05
DURATION_S = 0.6
LABELS = '{engine="0",model_name="tiny-llama"}'


class _NoNvml:
    """A pynvml whose init fails, so tests behave the same on GPU machines."""

    def nvmlInit(self) -> None:  # noqa: N802
        raise OSError("no NVML here")


def no_gpu_probe() -> NvmlProbe:
    return NvmlProbe(nvml=_NoNvml())


def _changing_metrics_page():
    """A page factory: the preemption counter grows by 2 per scrape, gauges cycle."""
    scrape_numbers = itertools.count()
    lock = threading.Lock()
    running_cycle = [1, 5, 3]
    waiting_cycle = [0, 2, 7]
    kv_cycle = [0.1, 0.9, 0.5]

    def page() -> str:
        with lock:
            n = next(scrape_numbers)
        i = n % 3
        return (
            "# TYPE vllm:num_requests_running gauge\n"
            f"vllm:num_requests_running{LABELS} {running_cycle[i]}.0\n"
            f"vllm:num_requests_waiting{LABELS} {waiting_cycle[i]}.0\n"
            f"vllm:kv_cache_usage_perc{LABELS} {kv_cycle[i]}\n"
            f"vllm:num_preemptions_total{LABELS} {100 + 2 * n}.0\n"
            f"vllm:generation_tokens_total{LABELS} {5000 + 64 * n}.0\n"
        )

    return page


def _run_for(sampler: TelemetrySampler, duration_s: float):
    sampler.start()
    time.sleep(duration_s)
    return sampler.stop()


def test_series_and_peaks_from_a_live_server(metrics_server) -> None:
    metrics_server.state.body = _changing_metrics_page()
    received = []
    sampler = TelemetrySampler(
        metrics_server.url, os.getpid(), INTERVAL_S, received.append, nvml_probe=no_gpu_probe()
    )
    result = _run_for(sampler, DURATION_S)

    expected = DURATION_S / INTERVAL_S
    assert 0.4 * expected <= len(result.series) <= 1.5 * expected + 2
    assert received == result.series
    assert all(tuple(sample) == SAMPLE_KEYS for sample in result.series)
    # The counter grows by 2 per scrape; a scrape lost to a slow machine only widens a step.
    counter = [s["num_preemptions_total"] for s in result.series]
    counter = [value for value in counter if value is not None]
    assert len(counter) >= 2
    assert result.peaks["preemptions"] == counter[-1] - counter[0]
    assert result.peaks["preemptions"] >= 2 * (len(counter) - 1)
    tokens = [s["generation_tokens_total"] for s in result.series]
    assert result.peaks["generation_tokens"] == tokens[-1] - tokens[0] >= 64 * (len(tokens) - 1)
    assert result.peaks["num_requests_running_max"] == 5
    assert result.peaks["num_requests_waiting_max"] == 7
    assert result.peaks["kv_cache_usage_perc_max"] == 0.9
    assert result.peaks["rss_bytes_max"] >= max(s["rss_bytes"] for s in result.series) > 0
    assert result.peaks["gpu_mem_used_bytes_max"] is None
    assert all(s["gpu_mem_used_bytes"] is None for s in result.series)
    assert all(isinstance(s["num_requests_running"], int) for s in result.series)
    times = [s["t"] for s in result.series]
    assert times == sorted(times) and abs(times[0] - time.time()) < 60


def test_stop_is_idempotent_and_result_is_json_ready(metrics_server) -> None:
    metrics_server.state.body = _changing_metrics_page()
    sampler = TelemetrySampler(
        metrics_server.url, os.getpid(), INTERVAL_S, nvml_probe=no_gpu_probe()
    )
    result = _run_for(sampler, 0.15)
    assert sampler.stop() is result
    assert sampler.start() is sampler  # a stopped sampler does not restart
    assert sampler.stop() is result
    encoded = json.loads(json.dumps(result.to_dict()))
    assert encoded["peaks"] == result.peaks
    assert len(encoded["series"]) == len(result.series)
    assert "series" not in result.to_dict(include_series=False)


def test_snapshot_gives_the_latest_sample(metrics_server) -> None:
    metrics_server.state.body = _changing_metrics_page()
    sampler = TelemetrySampler(metrics_server.url, None, INTERVAL_S, nvml_probe=no_gpu_probe())
    assert sampler.snapshot() is None
    sampler.start()
    try:
        assert _eventually(lambda: sampler.snapshot() is not None)
        snapshot = sampler.snapshot()
        assert snapshot["num_requests_running"] in (1, 5, 3)
        assert snapshot["rss_bytes"] is None  # no pid given
    finally:
        result = sampler.stop()
    assert sampler.snapshot() == result.series[-1]


def test_unreachable_server_gives_none_fields_without_raising(closed_port_url) -> None:
    sampler = TelemetrySampler(closed_port_url, os.getpid(), INTERVAL_S, nvml_probe=no_gpu_probe())
    result = _run_for(sampler, 0.2)
    assert result.series
    for sample in result.series:
        assert sample["kv_cache_usage_perc"] is None
        assert sample["num_preemptions_total"] is None
        assert sample["rss_bytes"] > 0
    assert result.peaks["preemptions"] is None
    assert result.peaks["kv_cache_usage_perc_max"] is None


def test_default_nvml_on_this_machine_never_raises() -> None:
    result = _run_for(TelemetrySampler(None, os.getpid(), INTERVAL_S), 0.15)
    assert result.series
    if not NvmlProbe().available():
        assert all(s["gpu_mem_used_bytes"] is None for s in result.series)
        assert all(s["gpu_proc_mem_bytes"] is None for s in result.series)


def test_failing_callback_and_failing_probe_do_not_stop_sampling(monkeypatch) -> None:
    def broken_rss(pid: int) -> int:
        raise RuntimeError("probe exploded")

    def broken_callback(sample: dict) -> None:
        raise ValueError("archive full")

    monkeypatch.setattr(sampler_module, "process_tree_rss", broken_rss)
    sampler = TelemetrySampler(
        None, os.getpid(), INTERVAL_S, broken_callback, nvml_probe=no_gpu_probe()
    )
    result = _run_for(sampler, 0.2)
    assert len(result.series) >= 2
    assert all(s["rss_bytes"] is None for s in result.series)


def test_stop_without_start_gives_an_empty_result() -> None:
    result = TelemetrySampler(None, None, nvml_probe=no_gpu_probe()).stop()
    assert result.series == []
    assert result.peaks["samples"] == 0
    assert result.peaks["preemptions"] is None


def test_gpu_fields_come_from_the_nvml_probe() -> None:
    class FakeProbe:
        def available(self) -> bool:
            return True

        def sample(self, pids):
            assert os.getpid() in pids
            return {
                "gpu_mem_used_bytes": 10,
                "gpu_mem_used_per_device": [10],
                "gpu_proc_mem_bytes": 7,
            }

    sample = TelemetrySampler(None, os.getpid(), nvml_probe=FakeProbe()).sample_once()
    assert sample["gpu_mem_used_bytes"] == 10
    assert sample["gpu_proc_mem_bytes"] == 7


def test_a_raising_gpu_probe_leaves_only_the_gpu_fields_none() -> None:
    class ExplodingProbe:
        def available(self) -> bool:
            return True

        def sample(self, pids):
            raise RuntimeError("GPU fell off the bus")

    sample = TelemetrySampler(None, os.getpid(), nvml_probe=ExplodingProbe()).sample_once()
    assert sample["gpu_mem_used_bytes"] is None
    assert sample["gpu_proc_mem_bytes"] is None
    assert sample["rss_bytes"] > 0


def test_interval_must_be_positive() -> None:
    with pytest.raises(ValueError):
        TelemetrySampler(None, None, interval_s=0)


@pytest.mark.parametrize(
    ("values", "increase"),
    [
        ([], None),
        ([None, None], None),
        ([5], 0),
        ([3, 3, 4, 9], 6),
        ([5, None, 7, 2, 4], 2 + 2 + 2),  # reset after 7: the 2 counts, then +2
    ],
)
def test_counter_increase(values, increase) -> None:
    assert counter_increase(values) == increase


def test_peaks_of_an_empty_series() -> None:
    peaks = compute_peaks([])
    assert peaks["samples"] == 0
    assert all(value is None for key, value in peaks.items() if key != "samples")


def _eventually(condition, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return False


def test_the_sample_type_names_every_key_once_in_order():
    from model_optimizer.telemetry.sampler import (
        GPU_KEYS,
        HOST_KEYS,
        THERMAL_KEYS,
        VLLM_KEYS,
        Sample,
    )
    assert tuple(Sample.__annotations__) == SAMPLE_KEYS == ("t", *VLLM_KEYS, *HOST_KEYS,
                                                            *GPU_KEYS, *THERMAL_KEYS)
