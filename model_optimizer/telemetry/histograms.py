"""vLLM's own latency histograms from `/metrics`, as the server saw a measured window.

vLLM's front end observes, per request, the time to first token, the time per output token
(its TPOT), the end-to-end latency and the queue time, and per token the inter-token latency,
in Prometheus histograms. Scraped when a window opens and when it closes, the difference of
the cumulative buckets, sums and counts is exactly the window's requests (mopt opens the
window after the warm-up drained and closes it after the last request finished). The mean of
a histogram is exact (``sum / count``); a percentile is interpolated inside its bucket (as
Prometheus' ``histogram_quantile`` does), so its resolution is that bucket's width, which
:func:`quantile` returns with it.

Label sets (one per engine or served model) are added up. Parsing is forgiving like
``telemetry.prometheus``: malformed lines are skipped.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from model_optimizer.telemetry.prometheus import fetch_page

#: our name -> vLLM's histogram (seconds)
SERVER_HISTOGRAMS: dict[str, str] = {
    "ttft": "vllm:time_to_first_token_seconds",
    "tpot": "vllm:request_time_per_output_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "e2e": "vllm:e2e_request_latency_seconds",
    "queue": "vllm:request_queue_time_seconds",
    "inference": "vllm:request_inference_time_seconds",
}
_LINE = re.compile(r'^(?P<name>[a-zA-Z_:][\w:]*?)_(?P<part>bucket|sum|count)'
                   r'(?P<labels>\{[^}]*\})?\s+(?P<value>\S+)')
_LE = re.compile(r'le="(?P<le>[^"]+)"')


@dataclass
class Histogram:
    """Cumulative bucket counts by upper bound, with the sum and count of observations."""

    buckets: dict[float, float] = field(default_factory=dict)
    total: float = 0.0
    count: float = 0.0

    def minus(self, earlier: Histogram) -> Histogram:
        """The observations made since ``earlier`` (a reset counts from zero)."""
        if self.count < earlier.count:
            return self
        return Histogram({le: n - earlier.buckets.get(le, 0.0) for le, n in self.buckets.items()},
                         self.total - earlier.total, self.count - earlier.count)

    def mean(self) -> float | None:
        """Mean observation in seconds, or None without observations."""
        return self.total / self.count if self.count > 0 else None

    def quantile(self, q: float) -> tuple[float, float] | None:
        """``(value, bucket width)`` of the ``q`` (0..1) quantile, interpolated linearly
        inside its bucket; None without observations. A quantile in the ``+Inf`` bucket
        takes the largest finite bound (width ``inf``)."""
        if self.count <= 0:
            return None
        rank, lower, below = q * self.count, 0.0, 0.0
        for upper in sorted(self.buckets):
            cumulative = self.buckets[upper]
            if cumulative >= rank and cumulative > below:
                if math.isinf(upper):
                    return lower, math.inf
                return lower + (upper - lower) * (rank - below) / (cumulative - below), \
                    upper - lower
            lower, below = upper, cumulative
        return lower, math.inf


def parse_histograms(text: str) -> dict[str, Histogram]:
    """The :data:`SERVER_HISTOGRAMS` of a `/metrics` page by our name (label sets added)."""
    wanted = {name: key for key, name in SERVER_HISTOGRAMS.items()}
    found: dict[str, Histogram] = {}
    for raw in text.splitlines():
        match = _LINE.match(raw.strip())
        if match is None or match["name"] not in wanted:
            continue
        try:
            value = float(match["value"])
        except ValueError:
            continue
        if not math.isfinite(value):
            continue
        histogram = found.setdefault(wanted[match["name"]], Histogram())
        if match["part"] == "sum":
            histogram.total += value
        elif match["part"] == "count":
            histogram.count += value
        elif (le := _LE.search(match["labels"] or "")) is not None:
            try:
                bound = float(le["le"])
            except ValueError:
                continue
            histogram.buckets[bound] = histogram.buckets.get(bound, 0.0) + value
    return found


def scrape_histograms(url: str, timeout_s: float = 5.0) -> dict[str, Histogram] | None:
    """GET a `/metrics` URL and parse its histograms; None when it cannot be read."""
    text = fetch_page(url, timeout_s)
    return None if text is None else parse_histograms(text)


def window_delta(before: dict[str, Histogram] | None,
                 after: dict[str, Histogram] | None) -> dict[str, Histogram] | None:
    """The window's own observations per histogram; None when either scrape failed."""
    if before is None or after is None:
        return None
    return {key: hist.minus(before.get(key, Histogram())) for key, hist in after.items()}
