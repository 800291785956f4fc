"""One measured window on a live server: the load with telemetry beside it, vLLM's own
histograms scraped when the window opens and closes, and the window's figures with their
checks (``crosscheck``: the client against the server, whether the server was fed).

``runner`` (apply, sweep, tune) and ``capacity`` measure through here, so every archived
window carries the same checks: ``server_check``, ``feed``, ``client_lag``, the machine's
``load_average`` before and after it and, on a GPU, each card's temperature and SM clock
(``thermals``), in ``metrics.json``. On a GPU the steady warm-up also waits for a steady
card (``telemetry.cardwatch``, bounded by ``workload.warmup_card_max_s``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, Protocol

from model_optimizer.archive import RunArchive
from model_optimizer.archive.names import REQUESTS_FILE, TELEMETRY_FILE
from model_optimizer.crosscheck import compare_latency, feed
from model_optimizer.engine.placement import Placement, client_placed
from model_optimizer.events import EventCallback, LoadProgress, LoadStarted
from model_optimizer.httpcall import join_url
from model_optimizer.load import run_load_sync
from model_optimizer.load.classes import apply_classes, run_slo
from model_optimizer.load.client import LoadResult
from model_optimizer.load.steady import summarize_steady
from model_optimizer.load.workload import LazyItems
from model_optimizer.recipe import RecipeSpec
from model_optimizer.recipe.render import Recipe
from model_optimizer.telemetry import TelemetrySampler
from model_optimizer.telemetry.cardwatch import CardWatch
from model_optimizer.telemetry.histograms import Histogram, parse_histograms, window_delta
from model_optimizer.telemetry.prefix_cache import parse_prefix_cache, prefix_cache_window
from model_optimizer.telemetry.prometheus import fetch_page
from model_optimizer.telemetry.thermal import samples_of, window_thermals

#: the success rate a run must reach when the recipe sets no slo.min_success_rate
DEFAULT_MIN_SUCCESS_RATE = 0.95
#: telemetry during a window: often enough that a starved server shows in the samples
SAMPLE_INTERVAL_S = 0.5
MAX_KEPT_SAMPLES = 100_000  # in memory for the checks (the archive keeps every one)


class Outcome(Protocol):
    """What a window fills in of its caller's outcome (``runner.RunOutcome``)."""

    metrics: dict
    telemetry_peaks: dict
    ready_after_s: float | None


class RunRecords:
    """Collects what the load and the sampler deliver, into the archive as it arrives, and
    what the window's checks need."""

    def __init__(self, archive: RunArchive, items: LazyItems):
        self.archive, self.items = archive, items
        self.records: list = []
        self.series: list[dict] = []
        self.server_before: dict | None = None
        self.server_after: dict | None = None
        self.prefix_before: dict | None = None  # vLLM's prefix-cache counters (tokens)
        self.prefix_after: dict | None = None
        self.client_lag: dict | None = None
        self.warmup: dict | None = None
        self.load_average: dict[str, float | None] = {"before": None, "after": None}
        self.opened_at: float | None = None  # wall time the measured window opened

    def on_record(self, record) -> None:
        self.archive.append_jsonl(REQUESTS_FILE, record.to_dict())
        if not record.warmup:
            self.records.append(record)

    def on_sample(self, sample: dict) -> None:
        self.archive.append_jsonl(TELEMETRY_FILE, sample)
        if len(self.series) < MAX_KEPT_SAMPLES:
            self.series.append(sample)


def load_average() -> float | None:
    """The machine's 1-minute load average (None where the OS has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def measure_endpoint(base_url: str, model_name: str, workload: dict,
                     archive: RunArchive, measurement: RunRecords, emit: EventCallback,
                     outcome: Outcome, server_pid: int | None = None,
                     should_stop: Callable[[], str | None] | None = None,
                     placement: Placement | None = None) -> LoadResult:
    """Run the load (``measurement.items``) with telemetry beside it, the client on the
    placement's client cores (``engine/placement.py``); vLLM's histograms are scraped when
    the measured window opens and after it closed. Return the LoadResult."""
    metrics_url = join_url(base_url, "/metrics")
    archive.set_status("running", phase="load")
    emit(LoadStarted(workload))

    def window_opens() -> None:
        measurement.opened_at = time.time()
        measurement.load_average["before"] = load_average()
        measurement.server_before, measurement.prefix_before = scrape_window(metrics_url)

    with client_placed(placement):  # before the sampler starts: its thread inherits
        sampler = TelemetrySampler(metrics_url, server_pid, SAMPLE_INTERVAL_S,
                                   on_sample=measurement.on_sample)
        sampler.start()
        try:
            result = run_load_sync(
                base_url, model_name, workload, measurement.items,
                on_record=measurement.on_record, should_stop=should_stop,
                on_progress=lambda snap: emit(LoadProgress(**snap,
                                                           telemetry=sampler.snapshot())),
                on_measure_start=window_opens,
                card=card_watch(workload, measurement, sampler))
        finally:
            outcome.telemetry_peaks = sampler.stop().peaks
    measurement.server_after, measurement.prefix_after = scrape_window(metrics_url)
    measurement.load_average["after"] = load_average()
    measurement.client_lag = result.client_lag
    measurement.warmup = result.warmup
    return result


def card_watch(workload: dict, measurement: RunRecords,
               sampler: TelemetrySampler) -> CardWatch | None:
    """The steady warm-up's wait for a steady card, reading the window's telemetry samples;
    None when there is no steady warm-up (``warmup_steady_max_s``) or no card check
    (``warmup_card_max_s`` null)."""
    max_s = workload.get("warmup_card_max_s")
    if not workload.get("warmup_steady_max_s") or not max_s:
        return None
    return CardWatch(lambda: measurement.series, float(max_s), nvml=sampler.gpu_available())


def scrape_window(metrics_url: str) -> tuple[dict[str, Histogram] | None, dict | None]:
    """One `/metrics` page read for vLLM's histograms and its prefix-cache counters."""
    page = fetch_page(metrics_url, 5.0)
    return (None, None) if page is None else (parse_histograms(page), parse_prefix_cache(page))


def effective_slo(recipe: Recipe) -> dict:
    """The recipe's SLOs (the load's input), with ``DEFAULT_MIN_SUCCESS_RATE`` when it sets
    no success rate."""
    slo = RecipeSpec.of(recipe).slo.to_dict()
    if slo["min_success_rate"] is None:
        slo["min_success_rate"] = DEFAULT_MIN_SUCCESS_RATE
    return slo


def finish_metrics(measurement: RunRecords, workload: dict, recipe: Recipe,
                   outcome: Outcome, window_s: float | None,
                   stopped_reason: str | None = None, closed_at: float | None = None) -> None:
    """The window's figures into ``outcome.metrics``, with the checks (module docstring)."""
    if window_s is None and measurement.records:  # interrupted: the span actually measured
        first_sent = min(r.sent_at for r in measurement.records)
        last_done = max(r.sent_at + (r.e2e_s or 0.0) for r in measurement.records)
        window_s = max(last_done - first_sent, 0.0) or None
    fixed = not (workload.get("mix") or workload.get("dataset"))
    slo = effective_slo(recipe)
    metrics = summarize_steady(measurement.records, window_s, run_slo(slo),
                               workload["output_tokens"] if fixed else None, close=closed_at,
                               steady=closed_at is not None)  # interrupted: whole window
    apply_classes(metrics, measurement.records, window_s, slo, measurement.items.classes)
    metrics["ignore_eos"] = workload.get("ignore_eos", True)
    metrics["stopped_reason"] = stopped_reason
    metrics["ready_after_s"] = outcome.ready_after_s
    metrics.update(window_checks(measurement, workload, metrics.get("steady")))
    replay = getattr(measurement.items, "replay", None)
    if replay is not None:  # a trace: the replayed rate against the trace's (load.replay)
        metrics["trace"] = replay.figures(measurement.records)
    outcome.metrics = metrics


def window_checks(measurement: RunRecords, workload: dict,
                  steady: dict[str, Any] | None) -> dict[str, Any]:
    """``server_window`` (vLLM's histogram counts and sums over the window), ``server_check``,
    ``feed``, ``client_lag``, ``load_average`` and ``thermals`` (per GPU over the steady
    window, else from its opening) of one window."""
    server = window_delta(measurement.server_before, measurement.server_after)
    closed_loop = str(workload.get("request_rate", "inf")) == "inf"
    start, end = (steady["start"], steady["end"]) if steady else (None, None)
    return {
        "server_window": None if server is None else {
            name: {"count": hist.count, "sum_s": hist.total} for name, hist in server.items()},
        "server_check": compare_latency(measurement.records, server),
        "feed": feed(measurement.records, server, measurement.series, start, end,
                     workload.get("concurrency") if closed_loop else None),
        "client_lag": measurement.client_lag,
        "prefix_cache": prefix_cache_window(measurement.prefix_before, measurement.prefix_after),
        "warmup": measurement.warmup,
        "load_average": dict(measurement.load_average),
        "thermals": [row.to_dict() for row in window_thermals(
            samples_of(measurement.series), start or measurement.opened_at, end)] or None,
    }
