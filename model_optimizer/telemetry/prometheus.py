"""Read the few vLLM series mopt needs from a Prometheus `/metrics` page.

vLLM exposes its scheduler state in the Prometheus text exposition format. We need five series:
KV-cache usage, the preemption counter, the running and waiting request gauges, and the
generated-token counter (which only grows while the server works: a 1 Hz sample of the
gauges can read 0 throughout a load on a busy machine, the counter cannot). Each may
come in several label sets (one per engine or served model name); counts are summed across label
sets, the KV-cache usage (a fraction per engine) takes the fullest engine. Older vLLM releases
used other names for two of them; both spellings are accepted, the current one first.

The parser is deliberately small and forgiving: comments, histograms, unknown metrics and
malformed lines are skipped, never raised on. The official `prometheus_client` parser raises on
the first bad line, which is the wrong trade for a sampler that must keep going.
"""

from __future__ import annotations

import math
import re

from model_optimizer.httpcall import HTTPCallError, call

# Our key -> accepted sample names, current vLLM name first.
SERIES_NAMES: dict[str, tuple[str, ...]] = {
    "kv_cache_usage_perc": ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
    "num_preemptions_total": ("vllm:num_preemptions_total", "vllm:num_preemptions"),
    "num_requests_running": ("vllm:num_requests_running",),
    "num_requests_waiting": ("vllm:num_requests_waiting",),
    "generation_tokens_total": ("vllm:generation_tokens_total",),
}

# Keys whose label sets are combined with max() instead of sum(): a fraction per engine.
_MAX_ACROSS_LABELS = frozenset({"kv_cache_usage_perc"})

_NAME_TO_KEY = {name: key for key, names in SERIES_NAMES.items() for name in names}

# name, optional {labels} (quoted values may hold '}' or escaped quotes), value, optional timestamp
_SAMPLE_LINE = re.compile(
    r"""^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)
        (?P<labels>\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?
        \s+(?P<value>\S+)
        (?:\s+-?\d+)?\s*$""",
    re.VERBOSE,
)


def _parse_value(text: str) -> float | None:
    """A sample value as a finite float, or None for NaN, infinities and junk."""
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _wanted_samples(text: str) -> dict[str, list[float]]:
    """Values of every wanted sample name, grouped by name, in page order."""
    values_by_name: dict[str, list[float]] = {}
    for raw_line in text.splitlines():
        line = raw_line.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE_LINE.match(line)
        if match is None or match["name"] not in _NAME_TO_KEY:
            continue
        value = _parse_value(match["value"])
        if value is not None:
            values_by_name.setdefault(match["name"], []).append(value)
    return values_by_name


def parse_metrics(text: str) -> dict[str, float | None]:
    """Parse a Prometheus text page into mopt's five vLLM series.

    Returns a dict with exactly the keys of `SERIES_NAMES` (`kv_cache_usage_perc`,
    `num_preemptions_total`, `num_requests_running`, `num_requests_waiting`,
    `generation_tokens_total`); a value is None
    when the page does not carry that series. Counts are summed over label sets; the KV-cache
    usage fraction (0..1) is the largest over label sets. When a page carries both the current
    and an older name for a series, only the current name is read (no double counting).
    """
    values_by_name = _wanted_samples(text)
    parsed: dict[str, float | None] = {}
    for key, names in SERIES_NAMES.items():
        values = next((values_by_name[name] for name in names if name in values_by_name), None)
        if values is None:
            parsed[key] = None
        elif key in _MAX_ACROSS_LABELS:
            parsed[key] = max(values)
        else:
            parsed[key] = sum(values)
    return parsed


MAX_METRICS_BYTES = 16 << 20  # a larger /metrics page is not vLLM's: no sample


def fetch_page(url: str, timeout_s: float = 2.0) -> str | None:
    """The text of a `/metrics` page (``timeout_s`` in total, at most ``MAX_METRICS_BYTES``
    read); None on any connection error, late or oversized answer, or non-200 answer."""
    try:
        reply = call("GET", url, deadline_s=timeout_s, max_bytes=MAX_METRICS_BYTES)
    except HTTPCallError:
        return None
    if reply.status != 200 or reply.truncated:
        return None
    return reply.text


def scrape(url: str, timeout_s: float = 2.0) -> dict[str, float | None] | None:
    """GET a `/metrics` URL and parse it (:func:`fetch_page`); None when it cannot be read."""
    text = fetch_page(url, timeout_s)
    return None if text is None else parse_metrics(text)


#: requests an engine finished (every finish reason): what a fleet counts per instance
REQUESTS_FINISHED = "vllm:request_success_total"


def counter_sum(text: str, name: str = REQUESTS_FINISHED) -> float | None:
    """The sum over label sets of the samples named ``name`` (None: the page has none)."""
    values = []
    for raw_line in text.splitlines():
        match = _SAMPLE_LINE.match(raw_line.strip())
        if match is not None and match["name"] == name:
            value = _parse_value(match["value"])
            if value is not None:
                values.append(value)
    return sum(values) if values else None


def scrape_counter(url: str, name: str = REQUESTS_FINISHED,
                   timeout_s: float = 2.0) -> float | None:
    """GET a `/metrics` URL and sum counter ``name``; None when it cannot be read."""
    text = fetch_page(url, timeout_s)
    return None if text is None else counter_sum(text, name)
