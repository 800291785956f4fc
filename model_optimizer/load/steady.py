"""Steady-state figures of one measured window, with 95% confidence intervals.

A closed loop starts with every slot sent at once and ends with the last requests draining
from a half-empty server; both ends under- or over-state what the server sustains. So the
figures a decision reads come from the **steady window** ``(ramp_end, close]``:

- **ramp**: the *first wave*, every request sent before the first measured request finished
  (a closed loop: the first ``concurrency`` requests). The steady window opens when the last
  of them has finished: by then the in-flight count has reached its target and each slot has
  turned over once.
- **close**: the moment sending stopped (the ``duration_s`` deadline, or the send of the last
  of ``num_requests``). Requests still running then are the **drain**.
- **throughput** (QPS, output and total tok/s, goodput): requests that *finished* inside the
  steady window, over its length. Drain requests finished after the close, so they are not
  counted as completed inside it.
- **latency** (TTFT, TPOT, ITL, E2E percentiles) and the SLO verdict: every request *sent*
  inside the steady window, drain requests included: the client lets them run to the end,
  so their latency is measured in full, and leaving them out would drop exactly the requests
  sent last. Their number is reported as ``drain_requests``.

Intervals (95%, two-sided):

- throughput by **batch means**: the steady window is cut into ``k`` (up to 10) equal
  sub-windows, the rate of each is one batch, and the half-width is
  ``t(k-1) * sd / sqrt(k)``. Sub-windows of whole seconds keep successive batches close to
  independent, which single request gaps are not.
- latency percentiles by a **percentile bootstrap** over requests (seeded, so an archive
  reproduces its own intervals).

Windows too short for this (fewer than :data:`MIN_STEADY_COMPLETIONS` completions in the
steady window) keep the whole-window figures and report no interval (``steady: null``).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

from model_optimizer.load.stats import (
    is_good_request,
    latency_samples,
    per_request_bounds_ms,
    percentile,
    slo_ratio,
    slo_violations,
    summarize,
)
from model_optimizer.load.stats import record_field as _field

MIN_STEADY_COMPLETIONS = 8
MAX_BATCHES = 10
MIN_BATCHES = 3
BOOTSTRAP_RESAMPLES = 400
BOOTSTRAP_SEED = 1729
RATE_KEYS = ("qps", "output_tok_s", "total_tok_s", "goodput_qps")
INTERVAL_LATENCIES = ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p99_ms",
                      "e2e_p50_ms", "e2e_p99_ms")

#: two-sided 97.5% quantiles of Student's t by degrees of freedom (1..30); above: normal
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201,
         2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069,
         2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


def t_quantile(dof: int) -> float:
    """The 97.5% quantile of Student's t with ``dof`` degrees of freedom."""
    if dof < 1:
        raise ValueError("t quantile needs at least one degree of freedom")
    return _T975[dof - 1] if dof <= len(_T975) else 1.96


def finish_time(record: Any) -> float | None:
    """When a request ended (epoch seconds): its stream's end, else its last chunk."""
    finished = _field(record, "finished_at")
    if finished is not None:
        return finished
    e2e_s = _field(record, "e2e_s")
    return None if e2e_s is None else _field(record, "sent_at") + e2e_s


def ramp_end(records: Sequence[Any]) -> float | None:
    """End of the first wave: the last finish among requests sent before the first finish."""
    finishes = [t for t in (finish_time(r) for r in records) if t is not None]
    if not finishes:
        return None
    first_finish = min(finishes)
    wave = [finish_time(r) for r in records if _field(r, "sent_at") < first_finish]
    return max((t for t in wave if t is not None), default=first_finish)


def batch_means(finishes: Sequence[float], weights: Sequence[float], start: float,
                end: float, batches: int = MAX_BATCHES) -> tuple[float, float | None, int]:
    """``(rate, half_width, k)``: weight per second over ``(start, end]`` and its 95% half-width
    by batch means over ``k`` equal sub-windows (None with fewer than 3 batches).

    A sub-window counts whole completions, so its rate is known only to one completion's
    weight per sub-window: the batch variance is never taken below that rounding's
    (resolution² / 12). Without this floor a perfectly regular server (equal counts in
    every sub-window) would read as infinitely precise and end a precision-bound window at
    once."""
    span = end - start
    if span <= 0:
        raise ValueError("batch means need a window of positive length")
    count = len(finishes)
    k = max(1, min(batches, count // 4))
    width = span / k
    sums = [0.0] * k
    for finish, weight in zip(finishes, weights, strict=True):
        sums[min(k - 1, int((finish - start) / width))] += weight
    rates = [total / width for total in sums]
    mean = sum(rates) / k
    if k < MIN_BATCHES:
        return mean, None, k
    variance = sum((rate - mean) ** 2 for rate in rates) / (k - 1)
    resolution = (sum(weights) / count) / width if count else 0.0
    variance = max(variance, resolution ** 2 / 12)
    return mean, t_quantile(k - 1) * math.sqrt(variance / k), k


def bootstrap_interval(values: Sequence[float], q: float, *, resamples: int = BOOTSTRAP_RESAMPLES,
                       rng: random.Random | None = None) -> tuple[float, float] | None:
    """95% percentile-bootstrap interval of the ``q``-th percentile of ``values``."""
    if len(values) < MIN_STEADY_COMPLETIONS:
        return None
    rng = rng or random.Random(BOOTSTRAP_SEED)
    estimates = sorted(percentile(rng.choices(values, k=len(values)), q)
                       for _ in range(resamples))
    return estimates[int(0.025 * (resamples - 1))], estimates[math.ceil(0.975 * (resamples - 1))]


def interval(value: float | None, half_width: float | None, **extra: Any) -> dict[str, Any]:
    """One figure with its interval, as metrics.json holds it."""
    low = high = None
    if value is not None and half_width is not None:
        low, high = value - half_width, value + half_width
    return {"value": value, "half_width": half_width, "low": low, "high": high, **extra}


def _rates(inside: list[Any], good: list[bool], start: float, end: float) -> dict[str, dict]:
    finishes = [finish_time(r) for r in inside]
    tokens_out = [float(_field(r, "output_tokens") or 0) for r in inside]
    tokens_all = [out + float(_field(r, "prompt_tokens") or 0) for r, out in zip(
        inside, tokens_out, strict=True)]
    weights = {"qps": [1.0] * len(inside), "output_tok_s": tokens_out,
               "total_tok_s": tokens_all, "goodput_qps": [float(g) for g in good]}
    out = {}
    for key in RATE_KEYS:
        rate, half_width, k = batch_means(finishes, weights[key], start, end)
        out[key] = interval(rate, half_width, method=f"batch means, {k} sub-windows")
    return out


def _latency_intervals(summary: Mapping[str, Any],
                       samples: Mapping[str, list[float]]) -> dict[str, dict]:
    rng = random.Random(BOOTSTRAP_SEED)
    out = {}
    for key in INTERVAL_LATENCIES:
        metric, pct = key.split("_")[0], float(key.split("_p")[1].removesuffix("_ms"))
        bounds = bootstrap_interval(samples.get(metric) or [], pct, rng=rng)
        value = summary.get(key)
        if bounds is None or value is None:
            out[key] = interval(value, None)
            continue
        low, high = bounds[0] * 1000.0, bounds[1] * 1000.0
        out[key] = {"value": value, "half_width": max(value - low, high - value),
                    "low": low, "high": high, "method": "percentile bootstrap"}
    return out


def steady_window(records: Sequence[Any], close: float | None) -> tuple[float, float] | None:
    """``(ramp_end, close)`` of the measured ``records``, or None when no steady part exists
    (the close defaults to the last send when the caller does not know it)."""
    if not records:
        return None
    start = ramp_end(records)
    end = close if close is not None else max(_field(r, "sent_at") for r in records)
    if start is None or end <= start:
        return None
    return start, end


def summarize_steady(records: Sequence[Any], window_s: float | None,
                     slo: Mapping[str, Any] | None = None,
                     output_tokens_expected: int | None = None,
                     close: float | None = None, steady: bool = True,
                     bounds: tuple[float, float] | None = None) -> dict[str, Any]:
    """:func:`~model_optimizer.load.stats.summarize`, with steady-state rates, latencies and
    SLO verdict when the window has a steady part (see the module docstring).

    ``bounds`` imposes a steady window found on a larger set of records (a request class is
    measured in the run's window, so class rates add up to the run's).

    Adds ``steady`` (the window: start, end, window_s, ramp_s, completed, drain_requests,
    rule), ``intervals`` (figure -> value, half_width, low, high, method) and
    ``whole_window`` (the rates over the whole window, for reference). Without a steady part
    (or with ``steady=False``: an interrupted run) ``steady`` and ``intervals`` are None and
    every figure is the whole window's.
    """
    records = list(records)
    summary = summarize(records, window_s, slo, output_tokens_expected)
    summary.update(steady=None, intervals=None,
                   whole_window={key: summary.get(key) for key in RATE_KEYS})
    imposed = bounds is not None
    if bounds is None:
        bounds = steady_window(records, close) if steady else None
    if bounds is None or not records:
        return summary
    start, end = bounds
    inside = [r for r in records if _field(r, "ok") and start < (finish_time(r) or 0) <= end]
    if len(inside) < MIN_STEADY_COMPLETIONS and not imposed:
        return summary
    sent_inside = [r for r in records if start <= _field(r, "sent_at") <= end]
    drain = [r for r in sent_inside if (finish_time(r) or math.inf) > end]
    latency = summarize(sent_inside, end - start, None, None)
    samples = latency_samples([r for r in sent_inside if _field(r, "ok")])
    per_request = per_request_bounds_ms(slo)
    good = [is_good_request(r, per_request) for r in inside]
    rates = _rates(inside, good, start, end)
    for key in [k for k in latency if k.endswith("_ms")]:
        summary[key] = latency[key]
    for key, figure in rates.items():
        summary[key] = figure["value"]
    summary["good_requests"] = sum(good)
    violations = slo_violations({**summary, "_samples_s": samples}, slo)
    summary["slo_met"], summary["slo_violations"] = not violations, violations
    summary["slo_ratio"] = slo_ratio(summary, slo, samples)
    summary["intervals"] = {**rates, **_latency_intervals(summary, samples)}
    summary["steady"] = {
        "start": start, "end": end, "window_s": end - start,
        "ramp_s": start - min(_field(r, "sent_at") for r in records),
        "completed": len(inside), "latency_requests": len(sent_inside),
        "drain_requests": len(drain),
        "rule": "ramp = first wave (sent before the first finish) until its last finish; "
                "rates count requests finished in (ramp end, close]; latencies every "
                "request sent in the window, drain requests included",
    }
    return summary


def qps_precision(records: Sequence[Any], close: float) -> float | None:
    """half-width / value of the steady-state QPS so far (cheap: no latency bootstrap), None
    while the window has no interval yet."""
    bounds = steady_window(records, close)
    if bounds is None:
        return None
    start, end = bounds
    finishes = [t for t in (finish_time(r) for r in records if _field(r, "ok"))
                if t is not None and start < t <= end]
    if len(finishes) < MIN_STEADY_COMPLETIONS:
        return None
    rate, half_width, _ = batch_means(finishes, [1.0] * len(finishes), start, end)
    return None if half_width is None or not rate else half_width / rate
