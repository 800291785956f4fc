"""vLLM's prefix-cache hit rate over a measured window, from its `/metrics` counters.

vLLM (0.32, ``v1/metrics/loggers.py``) counts prefix-cache *queries* and *hits* in tokens:
``vllm:prefix_cache_queries`` (prompt tokens looked up) and ``vllm:prefix_cache_hits``
(those found cached), one label set per engine, exposed by prometheus_client with the
``_total`` suffix. Scraped when a window opens and when it closes (the same pages as
``telemetry.histograms``), the difference is the window's own: ``hit_rate`` is the share of
the window's prompt tokens the cache served. The counters have no request class; per-class
shares come from each response's ``usage.prompt_tokens_details.cached_tokens`` (``load``).
"""

from __future__ import annotations

from typing import Any

from model_optimizer.telemetry.prometheus import counter_sum

#: our name -> accepted sample names (the exposed ``_total`` form first)
PREFIX_CACHE_COUNTERS: dict[str, tuple[str, ...]] = {
    "queries": ("vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries"),
    "hits": ("vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"),
}


def parse_prefix_cache(text: str | None) -> dict[str, float] | None:
    """``{"queries": tokens, "hits": tokens}`` of a `/metrics` page (label sets added);
    None when the page is missing or lacks either counter."""
    if text is None:
        return None
    found: dict[str, float] = {}
    for key, names in PREFIX_CACHE_COUNTERS.items():
        value = next((v for v in (counter_sum(text, name) for name in names) if v is not None),
                     None)
        if value is None:
            return None
        found[key] = value
    return found


def prefix_cache_window(before: dict[str, float] | None,
                        after: dict[str, float] | None) -> dict[str, Any] | None:
    """The window's queried and hit tokens and their ratio (None: a scrape failed). A counter
    that went down was reset (a restarted server): its value after counts from zero."""
    if before is None or after is None:
        return None
    delta = {}
    for key in PREFIX_CACHE_COUNTERS:
        grown = after[key] - before[key]
        delta[key] = after[key] if grown < 0 else grown
    queried, hits = delta["queries"], min(delta["hits"], delta["queries"])
    return {"queried_tokens": queried, "hit_tokens": hits,
            "hit_rate": hits / queried if queried > 0 else None}


def prefix_cache_line(window: dict[str, Any] | None) -> str | None:
    """``prefix cache: 63% of prompt tokens hit (12,800 of 20,317)`` or None."""
    if not window or window.get("hit_rate") is None:
        return None
    return (f"prefix cache: {window['hit_rate']:.0%} of prompt tokens hit "
            f"({window['hit_tokens']:,.0f} of {window['queried_tokens']:,.0f}, vLLM's counters)")
