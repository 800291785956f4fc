"""A background sampler that records server telemetry while a load test runs.

Every `interval_s` a daemon thread takes one sample: vLLM's scheduler gauges from `/metrics`,
the host RSS of the server's process tree, and GPU memory through NVML. Each probe fails on its
own: a failing probe leaves its fields None and the sampler goes on. Nothing raises into the
caller, including a failing `on_sample` callback.

Sample keys (all but `t` may be None):
    t                      wall-clock time, epoch seconds
    kv_cache_usage_perc    fraction of the KV cache in use (0..1, fullest engine)
    num_preemptions_total  vLLM's cumulative preemption counter
    num_requests_running   requests in the running batch
    num_requests_waiting   requests queued
    generation_tokens_total  vLLM's cumulative count of generated tokens
    rss_bytes              RSS of the server process and its descendants
    gpu_mem_used_bytes     memory used on the probed GPUs (all processes, summed over devices)
    gpu_proc_mem_bytes     GPU memory held by the server's process tree, where NVML reports it
    gpu_thermals           per GPU: index, temperature_c, sm_clock_mhz, mem_clock_mhz, power_w,
                           gpu_busy_pct (``NvmlProbe.thermals``; the warm-card check,
                           ``telemetry.thermal``, reads it)
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypedDict

from model_optimizer.telemetry.memory import NvmlProbe, process_tree_pids, process_tree_rss
from model_optimizer.telemetry.prometheus import scrape

logger = logging.getLogger(__name__)

#: the fields each probe fills (a failing probe leaves its own fields None)
VLLM_KEYS = ("kv_cache_usage_perc", "num_preemptions_total", "num_requests_running",
             "num_requests_waiting", "generation_tokens_total")
HOST_KEYS = ("rss_bytes",)
GPU_KEYS = ("gpu_mem_used_bytes", "gpu_proc_mem_bytes")
THERMAL_KEYS = ("gpu_thermals",)
SAMPLE_KEYS = ("t", *VLLM_KEYS, *HOST_KEYS, *GPU_KEYS, *THERMAL_KEYS)
_COUNT_KEYS = ("num_preemptions_total", "num_requests_running", "num_requests_waiting",
               "generation_tokens_total")


class Sample(TypedDict, total=False):
    """One telemetry sample (one line of ``telemetry.jsonl``); see the module docstring."""

    t: float
    kv_cache_usage_perc: float | None
    num_preemptions_total: int | None
    num_requests_running: int | None
    num_requests_waiting: int | None
    generation_tokens_total: int | None
    rss_bytes: int | None
    gpu_mem_used_bytes: int | None
    gpu_proc_mem_bytes: int | None
    gpu_thermals: list[dict[str, Any]] | None


def _max_of(series: list[Sample], key: str) -> Any:
    """Largest non-None value of `key` over the series, or None."""
    values = [sample[key] for sample in series if sample.get(key) is not None]
    return max(values) if values else None


def counter_increase(values: list[float | int | None]) -> float | int | None:
    """Increase of a monotonic counter over a window, tolerating resets (like PromQL increase).

    None values are skipped; a drop is taken as a counter reset (server restart) and the new
    value counts as the increase since the reset. None when no value is known.
    """
    known = [value for value in values if value is not None]
    if not known:
        return None
    increase = 0
    for previous, current in zip(known, known[1:], strict=False):
        increase += current - previous if current >= previous else current
    return increase


def compute_peaks(series: list[Sample]) -> dict[str, Any]:
    """Peaks of a sample series; each None when the series never had that field."""
    return {
        "samples": len(series),
        "kv_cache_usage_perc_max": _max_of(series, "kv_cache_usage_perc"),
        "num_requests_running_max": _max_of(series, "num_requests_running"),
        "num_requests_waiting_max": _max_of(series, "num_requests_waiting"),
        "preemptions": counter_increase([s.get("num_preemptions_total") for s in series]),
        "generation_tokens": counter_increase([s.get("generation_tokens_total")
                                               for s in series]),
        "rss_bytes_max": _max_of(series, "rss_bytes"),
        "gpu_mem_used_bytes_max": _max_of(series, "gpu_mem_used_bytes"),
        "gpu_proc_mem_bytes_max": _max_of(series, "gpu_proc_mem_bytes"),
    }


@dataclass
class TelemetryResult:
    """The samples of one window and their peaks (see `compute_peaks`)."""

    series: list[Sample] = field(default_factory=list)
    peaks: dict[str, Any] = field(default_factory=dict)

    def to_dict(self, include_series: bool = True) -> dict[str, Any]:
        """JSON-ready form; `include_series=False` keeps only the peaks."""
        result: dict[str, Any] = {"peaks": dict(self.peaks)}
        if include_series:
            result["series"] = [dict(sample) for sample in self.series]
        return result


class TelemetrySampler:
    """Samples `/metrics`, process-tree RSS and NVML every `interval_s` on a daemon thread.

    `metrics_url` is the full URL of the server's `/metrics` page and `pid` the server's PID;
    either may be None to skip that probe. `on_sample(sample)` is called from the sampler thread
    after each sample. `nvml_probe` lets callers (and tests) supply or share an `NvmlProbe`;
    by default one is created and closed by this sampler.
    """

    def __init__(
        self,
        metrics_url: str | None,
        pid: int | None,
        interval_s: float = 1.0,
        on_sample: Callable[[Sample], None] | None = None,
        *,
        nvml_probe: NvmlProbe | None = None,
        scrape_timeout_s: float | None = None,
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        self.metrics_url = metrics_url
        self.pid = pid
        self.interval_s = interval_s
        self.on_sample = on_sample
        self.scrape_timeout_s = scrape_timeout_s or max(0.5, min(interval_s, 5.0))
        self._nvml = nvml_probe if nvml_probe is not None else NvmlProbe()
        self._owns_nvml = nvml_probe is None
        self._series: list[Sample] = []
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._thread: threading.Thread | None = None
        self._result: TelemetryResult | None = None
        self._callback_failed = False
        self._failed_probes: set[str] = set()

    def _scrape_fields(self) -> dict[str, Any]:
        """The vLLM series, all None when there is no URL or the scrape fails."""
        parsed = None
        if self.metrics_url:
            parsed = scrape(self.metrics_url, self.scrape_timeout_s)
        fields = {key: (parsed or {}).get(key) for key in VLLM_KEYS}
        for key in _COUNT_KEYS:
            if fields[key] is not None:
                fields[key] = round(fields[key])
        return fields

    def _rss_fields(self) -> dict[str, Any]:
        """Host RSS of the server process tree; None without a PID or once it has exited."""
        return {"rss_bytes": process_tree_rss(self.pid) if self.pid is not None else None}

    def gpu_available(self) -> bool:
        """Whether NVML answers here (the GPU fields of the samples can be filled)."""
        try:
            return self._nvml.available()
        except Exception:
            return False

    def _gpu_fields(self) -> dict[str, Any]:
        """GPU memory used, and the part held by the server's process tree; None without NVML."""
        if not self._nvml.available():
            return dict.fromkeys(GPU_KEYS)
        pids = process_tree_pids(self.pid) if self.pid is not None else set()
        gpu = self._nvml.sample(pids)
        return {key: gpu.get(key) for key in GPU_KEYS}

    def _thermal_fields(self) -> dict[str, Any]:
        """Each device's temperature, clocks, power and busy share; None without NVML."""
        if not self._nvml.available():
            return dict.fromkeys(THERMAL_KEYS)
        return {"gpu_thermals": self._nvml.thermals() or None}

    def _guarded(self, probe: Callable[[], dict[str, Any]], keys: tuple[str, ...]) -> dict:
        """Run one probe; on any error give None for its keys (logged once per probe)."""
        try:
            return probe()
        except Exception:
            first_failure = probe.__name__ not in self._failed_probes
            self._failed_probes.add(probe.__name__)
            log = logger.warning if first_failure else logger.debug
            log("telemetry probe %s failed", probe.__name__, exc_info=True)
            return dict.fromkeys(keys)

    def sample_once(self) -> Sample:
        """Take one sample now (without recording it). Never raises."""
        sample: Sample = {"t": time.time()}
        sample.update(self._guarded(self._scrape_fields, VLLM_KEYS))
        sample.update(self._guarded(self._rss_fields, HOST_KEYS))
        sample.update(self._guarded(self._gpu_fields, GPU_KEYS))
        sample.update(self._guarded(self._thermal_fields, THERMAL_KEYS))
        return sample

    def _record(self, sample: Sample) -> None:
        """Append a sample and hand it to the callback; a failing callback is logged once."""
        with self._lock:
            self._series.append(sample)
        if self.on_sample is None:
            return
        try:
            self.on_sample(dict(sample))
        except Exception:
            if not self._callback_failed:
                logger.exception("telemetry on_sample callback failed")
            self._callback_failed = True

    def _run(self) -> None:
        """Sampler loop: sample, wait until the next tick (or stop), and sample once at stop."""
        next_tick = time.monotonic()
        while True:
            self._record(self.sample_once())
            next_tick += self.interval_s
            now = time.monotonic()
            if next_tick < now:  # a slow probe: skip missed ticks instead of bursting
                next_tick = now + self.interval_s
            if self._stop_event.wait(next_tick - now):
                self._record(self.sample_once())
                return

    def start(self) -> TelemetrySampler:
        """Start the sampler thread (the first sample is taken at once); idempotent."""
        if self._thread is None and self._result is None:
            self._thread = threading.Thread(target=self._run, name="mopt-telemetry", daemon=True)
            self._thread.start()
        return self

    def snapshot(self) -> Sample | None:
        """A copy of the latest sample, or None before the first one (for a live display)."""
        with self._lock:
            return dict(self._series[-1]) if self._series else None

    def stop(self, timeout_s: float | None = None) -> TelemetryResult:
        """Stop the thread (it takes a last sample), close probes, and return the result.

        Idempotent: later calls return the same result. Stopping a sampler that was never
        started returns an empty result.
        """
        if self._result is not None:
            return self._result
        self._stop_event.set()
        if self._thread is not None:
            self._thread.join(timeout_s if timeout_s is not None else self._join_timeout_s())
        self._close_probes()
        with self._lock:
            series = list(self._series)
        self._result = TelemetryResult(series=series, peaks=compute_peaks(series))
        return self._result

    def _join_timeout_s(self) -> float:
        """Long enough for one in-flight sample plus the final one."""
        return 2 * (self.scrape_timeout_s + 5.0)

    def _close_probes(self) -> None:
        """Close the NVML probe (if ours), ignoring errors."""
        try:
            if self._owns_nvml:
                self._nvml.close()
        except Exception:
            logger.debug("closing telemetry probes failed", exc_info=True)

    def __enter__(self) -> TelemetrySampler:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
