"""Telemetry: samplers (Prometheus `/metrics`, NVML, process RSS) that run beside a load test.

`TelemetrySampler` is the entry point for a run; the probes are usable alone.
"""

from model_optimizer.telemetry.memory import (
    NvmlProbe,
    cpu_flags,
    cpu_model_name,
    hardware_label,
    hardware_seen,
    process_tree_pids,
    process_tree_rss,
    this_hardware,
)
from model_optimizer.telemetry.prometheus import SERIES_NAMES, parse_metrics, scrape
from model_optimizer.telemetry.sampler import (
    SAMPLE_KEYS,
    TelemetryResult,
    TelemetrySampler,
    compute_peaks,
    counter_increase,
)

__all__ = [
    "SAMPLE_KEYS",
    "SERIES_NAMES",
    "NvmlProbe",
    "TelemetryResult",
    "TelemetrySampler",
    "compute_peaks",
    "cpu_flags",
    "counter_increase",
    "cpu_model_name",
    "hardware_label",
    "hardware_seen",
    "parse_metrics",
    "process_tree_pids",
    "process_tree_rss",
    "scrape",
    "this_hardware",
]
