"""Statistics over the records of one measured load window.

Definitions (docs/design.md section 3, the same as vLLM's ``vllm bench serve``):

- TTFT: request sent -> first chunk carrying generated output.
- E2E: request sent -> last chunk carrying generated output.
- TPOT: ``(E2E - TTFT) / (output_tokens - 1)`` per request, for ``output_tokens > 1``, where
  the client could time it (:func:`tpot_measurable`): never 0 because chunks waited together
  in the socket. A window where more than :data:`UNMEASURABLE_LIMIT` of its multi-token
  requests could not be timed reports TPOT as not measurable (None, with ``tpot_note``), so
  a TPOT bound is violated ("no data"), never met.
- ITL: gaps between consecutive socket reads carrying content, pooled over all requests.
- QPS and token rates: completed requests (tokens) / the measured window in seconds.

Percentiles use linear interpolation between closest ranks, the same as numpy's default
``method="linear"``: for sorted values ``v`` and quantile ``q``, position ``(n - 1) * q``.

Goodput counts completed requests that *individually* met every per-request latency bound of
the SLO, per second of the window. Like vLLM's ``--goodput``, it judges each request by its own
TTFT, TPOT and E2E; the percentile in a bound's name does not matter there, and when several
bounds name one metric (``ttft_p50_ms`` and ``ttft_p99_ms``) the loosest applies, because a
request slower than the p50 bound but faster than the p99 bound violates no SLO on its own.
ITL bounds take no part in goodput (a request has many ITLs; vLLM leaves them out too).
``slo_met`` is the aggregate verdict: every ``<metric>_<pNN>_ms`` bound compared with the
matching percentile of the window, plus ``min_success_rate`` and ``min_qps``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

LATENCY_METRICS = ("ttft", "tpot", "itl", "e2e")
PERCENTILES = (50, 90, 99)
GOODPUT_METRICS = ("ttft", "tpot", "e2e")
_BOUND_KEY = re.compile(r"^(ttft|tpot|itl|e2e)_p(\d+(?:\.\d+)?)_ms$")


def percentile(values: Sequence[float], q: float) -> float | None:
    """Return the ``q``-th percentile (0..100) of ``values`` by linear interpolation.

    Matches ``numpy.percentile(values, q)`` (method ``linear``). None for no values.
    """
    if not values:
        return None
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q}")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100.0
    lower = math.floor(position)
    upper = min(lower + 1, len(ordered) - 1)
    fraction = position - lower
    return ordered[lower] + (ordered[upper] - ordered[lower]) * fraction


def _field(record: Any, name: str) -> Any:
    """Read ``name`` from a RequestRecord or from its ``to_dict()`` form."""
    if isinstance(record, Mapping):
        return record.get(name)
    return getattr(record, name, None)


UNMEASURABLE_LIMIT = 0.10


def tpot_measurable(record: Any) -> bool:
    """Whether the client saw one multi-token request's decode: its content came in more
    than one socket read, and its first-to-last span is longer than the client's read lag
    while it ran (``read_lag_s``; records of older archives have neither field, and only
    identical first and last offsets tell there)."""
    ttft_s, e2e_s = _field(record, "ttft_s"), _field(record, "e2e_s")
    if ttft_s is None or e2e_s is None:
        return False
    reads, lag_s = _field(record, "content_reads"), _field(record, "read_lag_s")
    if reads is not None and reads < 2:
        return False
    span_s = e2e_s - ttft_s
    return span_s > (lag_s or 0.0) and span_s > 0


def request_tpot_s(record: Any) -> float | None:
    """TPOT of one request in seconds, or None when it is undefined (one token, failure)
    or the client could not time it (:func:`tpot_measurable`)."""
    output_tokens = _field(record, "output_tokens")
    if not output_tokens or output_tokens <= 1 or not tpot_measurable(record):
        return None
    return (_field(record, "e2e_s") - _field(record, "ttft_s")) / (output_tokens - 1)


def tpot_coverage(completed: Sequence[Any]) -> tuple[int, int]:
    """``(unmeasurable, multi_token)``: completed multi-token requests whose TPOT the client
    could not time, and all of them."""
    multi = [r for r in completed if (_field(r, "output_tokens") or 0) > 1
             and _field(r, "ttft_s") is not None]
    return sum(1 for r in multi if not tpot_measurable(r)), len(multi)


def tpot_note(completed: Sequence[Any]) -> str | None:
    """Why the window's TPOT is not measurable, or None when it is (see the module doc)."""
    unmeasurable, multi = tpot_coverage(completed)
    if not multi or unmeasurable <= UNMEASURABLE_LIMIT * multi:
        return None
    lags = [_field(r, "read_lag_s") for r in completed if _field(r, "read_lag_s") is not None]
    lag = percentile(lags, 50)
    shown = f"; the client's read lag p50 {lag * 1000:.0f} ms" if lag is not None else ""
    return (f"TPOT not measurable: {unmeasurable} of {multi} requests' tokens reached the "
            f"client within its read lag (in one socket read{shown}): the client read late, "
            "not the server fast (docs/figures.md)")


def _latency_samples(completed: list[Any]) -> dict[str, list[float]]:
    """Seconds per metric: one sample per request (ITL: one per read gap); no TPOT or ITL
    samples at all when the window's TPOT is not measurable (:func:`tpot_note`)."""
    samples: dict[str, list[float]] = {metric: [] for metric in LATENCY_METRICS}
    timed = tpot_note(completed) is None
    for record in completed:
        if _field(record, "ttft_s") is not None:
            samples["ttft"].append(_field(record, "ttft_s"))
        if _field(record, "e2e_s") is not None:
            samples["e2e"].append(_field(record, "e2e_s"))
        tpot_s = request_tpot_s(record)
        if tpot_s is not None and timed:
            samples["tpot"].append(tpot_s)
        if timed:
            samples["itl"].extend(_field(record, "itl_s") or ())
    return samples


def _latency_summary(samples: dict[str, list[float]]) -> dict[str, float | None]:
    """``<metric>_mean_ms`` and ``<metric>_p<NN>_ms`` keys, None without data."""
    summary: dict[str, float | None] = {}
    for metric in LATENCY_METRICS:
        values = samples[metric]
        mean = sum(values) / len(values) if values else None
        summary[f"{metric}_mean_ms"] = None if mean is None else mean * 1000.0
        for pct in PERCENTILES:
            value = percentile(values, pct)
            summary[f"{metric}_p{pct}_ms"] = None if value is None else value * 1000.0
    return summary


def _per_request_bounds_ms(slo: Mapping[str, Any] | None) -> dict[str, float]:
    """The loosest bound set per goodput metric (see the module docstring)."""
    bounds: dict[str, float] = {}
    for key, value in (slo or {}).items():
        match = _BOUND_KEY.match(key)
        if value is None or match is None or match.group(1) not in GOODPUT_METRICS:
            continue
        metric = match.group(1)
        bounds[metric] = max(bounds.get(metric, float(value)), float(value))
    return bounds


def is_good_request(record: Any, bounds_ms: Mapping[str, float]) -> bool:
    """Whether one completed request met every per-request bound (ms by metric)."""
    if not _field(record, "ok"):
        return False
    per_request_s = {
        "ttft": _field(record, "ttft_s"),
        "e2e": _field(record, "e2e_s"),
        "tpot": request_tpot_s(record),
    }
    for metric, bound_ms in bounds_ms.items():
        value_s = per_request_s.get(metric)
        if metric == "tpot" and value_s is None and (_field(record, "output_tokens") or 0) > 1:
            return False  # a TPOT the client could not time never meets a bound
        if value_s is not None and value_s * 1000.0 > bound_ms:
            return False
    return True


def _format(value: float) -> str:
    """``5000.0`` -> ``5000``, ``5123.44`` -> ``5123.4``, ``0.98765`` -> ``0.9877``."""
    if float(value).is_integer():
        return str(int(value))
    return f"{value:.4g}" if abs(value) < 10 else f"{value:.1f}"


def slo_violations(summary: Mapping[str, Any], slo: Mapping[str, Any] | None,
                   samples_s: Mapping[str, list[float]] | None = None) -> list[str]:
    """Aggregate SLO violations of a summary, e.g. ``"ttft_p99_ms 5123.4 > 5000"``.

    ``min_success_rate`` and ``min_qps`` read ``"success_rate 0.95 < 0.99"``, ``"qps 3.2 < 5"``.
    ``samples_s`` (per-request latencies in seconds by metric) serves a bound whose
    percentile the summary does not hold (``ttft_p95_ms``).
    """
    violations: list[str] = []
    for key, bound in (slo or {}).items():
        if bound is None or key == "classes":  # per-class bounds: load.classes
            continue
        if key in ("min_success_rate", "min_qps"):
            name, op = key.removeprefix("min_"), "<"
            actual = summary.get(name)
            failed = actual is None or actual < bound
        elif _BOUND_KEY.match(key):
            name, op = key, ">"
            actual = _aggregate_for_bound(summary, key, samples_s)
            failed = actual is None or actual > bound
        else:
            raise ValueError(f"unknown SLO key {key!r}")
        if failed:
            shown = "no data" if actual is None else _format(actual)
            violations.append(f"{name} {shown} {op} {_format(float(bound))}")
    return violations


def slo_ratio(summary: Mapping[str, Any], slo: Mapping[str, Any] | None,
               samples_s: Mapping[str, list[float]] | None = None) -> float | None:
    """The worst latency bound's use: the largest ``<metric>_<pNN>_ms`` figure over its
    bound (1.0 at the bound, above 1 a miss), None when the SLO sets no latency bound or the
    window has no figure for one. A sweep judges a level's SLO over all its windows with it
    (``search/core/slocheck.py``); ``min_success_rate`` and ``min_qps`` are not in it."""
    ratios = []
    for key, bound in (slo or {}).items():
        if bound is None or not _BOUND_KEY.match(key) or float(bound) <= 0:
            continue
        actual = _aggregate_for_bound(summary, key, samples_s)
        if actual is None:
            return None
        ratios.append(float(actual) / float(bound))
    return max(ratios) if ratios else None


def _aggregate_for_bound(summary: Mapping[str, Any], key: str,
                         samples: Mapping[str, list[float]] | None) -> float | None:
    """The window's value for a ``<metric>_p<NN>_ms`` bound (computed if not a standard NN)."""
    if key in summary:
        return summary[key]
    match = _BOUND_KEY.match(key)
    if samples is None or match is None:
        return None
    value = percentile(samples[match.group(1)], float(match.group(2)))
    return None if value is None else value * 1000.0


def summarize(
    records: Iterable[Any],
    window_s: float | None,
    slo: Mapping[str, Any] | None = None,
    output_tokens_expected: int | None = None,
) -> dict[str, Any]:
    """Summarize measured records (RequestRecord or their dicts) into flat figures.

    Keys: requests, completed, failed, success_rate, error_rate, window_s, qps, output_tok_s,
    total_tok_s, total_prompt_tokens, total_output_tokens, ``<m>_mean_ms`` and
    ``<m>_p50/p90/p99_ms`` for m in ttft/tpot/itl/e2e (None without data), good_requests,
    goodput_qps, slo_met, slo_violations, slo_ratio (:func:`slo_ratio`) and, with
    ``output_tokens_expected``, mismatched_output_tokens (completed requests whose usage
    reported another count).
    Rates are None when ``window_s`` is missing or not positive.
    """
    records = list(records)
    completed = [record for record in records if _field(record, "ok")]
    requests, done = len(records), len(completed)
    prompt_total = sum(_field(record, "prompt_tokens") or 0 for record in completed)
    output_total = sum(_field(record, "output_tokens") or 0 for record in completed)
    has_window = window_s is not None and window_s > 0

    def rate(count: float) -> float | None:
        return count / window_s if has_window else None

    summary: dict[str, Any] = {
        "requests": requests,
        "completed": done,
        "failed": requests - done,
        "success_rate": done / requests if requests else None,
        "error_rate": (requests - done) / requests if requests else None,
        "window_s": window_s,
        "qps": rate(done),
        "output_tok_s": rate(output_total),
        "total_tok_s": rate(prompt_total + output_total),
        "total_prompt_tokens": prompt_total,
        "total_output_tokens": output_total,
    }
    samples = _latency_samples(completed)
    summary.update(_latency_summary(samples))
    summary["tpot_unmeasurable"], _ = tpot_coverage(completed)
    summary["tpot_note"] = tpot_note(completed)
    bounds_ms = _per_request_bounds_ms(slo)
    good = sum(1 for record in completed if is_good_request(record, bounds_ms))
    summary["good_requests"] = good
    summary["goodput_qps"] = rate(good)
    violations = slo_violations(summary, slo, samples)
    summary["slo_met"] = not violations
    summary["slo_violations"] = violations
    summary["slo_ratio"] = slo_ratio(summary, slo, samples)
    if output_tokens_expected is not None:
        summary["mismatched_output_tokens"] = sum(
            1 for record in completed
            if _field(record, "output_tokens") != output_tokens_expected
        )
    return summary


def record_field(record: Any, name: str) -> Any:
    """``name`` of a RequestRecord or of its ``to_dict()`` form (None when absent)."""
    return _field(record, name)


def per_request_bounds_ms(slo: Mapping[str, Any] | None) -> dict[str, float]:
    """The per-request bound (ms) by goodput metric that ``slo`` sets (the loosest per metric)."""
    return _per_request_bounds_ms(slo)


#: public name of the latency-sample helper ``load/steady.py`` shares (one definition)
latency_samples = _latency_samples
