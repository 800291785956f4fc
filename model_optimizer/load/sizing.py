"""From a measured capacity to a fleet: replicas for a target rate, cost, the binding limit.

Pure arithmetic over a capacity search's result (``load.rate_search.summary``) and the
figures of its windows; prices come only from the recipe (``hardware.price_per_hour``,
one server per hour), never from a built-in table.

- **Sustainable rate** and its interval: the highest rate that passed, and the lowest that
  failed above it (the truth lies between; the search's resolution bounds the gap).
- **Replicas** for ``target_rate``: each server is planned at ``(1 - headroom)`` of what it
  carried in the window that passed, the lower of the offered rate and the goodput measured
  there (a short Poisson window may send fewer requests than the rate asks: on 2026-12-02
  the tiny model passed at 6.73 req/s offered with 5.58 req/s of goodput),
  ``ceil(target / (carried x (1 - headroom)))``; the same at the failing rate is the
  optimistic bound (what the count would be if capacity were at the top of its interval).
- **Cost**: servers x price per hour; per million output tokens at the target rate (or, with
  no target, one server at its sustainable rate), output tokens per request as measured in
  the window that passed.
- **Binding limit**: what made the first failing window fail, in order: preemptions, a full
  KV cache (usage >= ``KV_FULL``), an SLO bound (named: TTFT p99 ...), goodput below the
  offered rate (the server fell behind), the client.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

#: KV-cache usage at which the cache counts as full (telemetry's fraction 0..1)
KV_FULL = 0.99
#: words for the SLO keys a violation starts with
SLO_WORDS = {"ttft_p99_ms": "TTFT p99", "ttft_p95_ms": "TTFT p95", "ttft_p50_ms": "TTFT p50",
             "tpot_p50_ms": "TPOT p50", "tpot_p99_ms": "TPOT p99", "e2e_p99_ms": "E2E p99",
             "e2e_p50_ms": "E2E p50", "itl_p99_ms": "ITL p99", "success_rate": "success rate",
             "qps": "throughput (min_qps)"}


@dataclass(frozen=True)
class Sizing:
    """The capacity answer in servers and money (None where an input is missing)."""

    rate_rps: float | None
    per_server_rps: float | None
    rate_interval: tuple[float | None, float | None]
    binding_limit: str
    target_rps: float | None
    headroom: float
    replicas: int | None
    replicas_optimistic: int | None
    output_tokens_per_request: float | None
    price_per_hour: float | None
    cost_per_hour: float | None
    cost_per_million_output_tokens: float | None

    def to_dict(self) -> dict:
        """JSON-ready."""
        return {**asdict(self), "rate_interval": list(self.rate_interval)}


def binding_limit(failing: dict | None) -> str:
    """What bound the capacity, in words, from the first failing window (or why none)."""
    if failing is None:
        return "none reached: every rate tried passed (raise capacity.max_rate)"
    preemptions = failing.get("preemptions") or 0
    if preemptions > 0:
        return f"preemptions ({preemptions:g} in the failing window: KV cache too small)"
    kv = failing.get("kv_cache_usage_max")
    if kv is not None and kv >= KV_FULL:
        return f"KV capacity (cache {kv:.0%} full in the failing window)"
    for violation in failing.get("slo_violations") or []:
        text = str(violation)
        scope, _, body = text.rpartition(": ")
        key = body.split(" ", 1)[0]
        if key in SLO_WORDS:
            where = f" of class {scope}" if scope else ""
            return f"{SLO_WORDS[key]}{where} ({body})"
    reason = str(failing.get("reason") or "")
    if "could be sent" in reason:
        return "the load generator (it could not send the offered rate)"
    if "goodput" in reason:
        return f"throughput: the server fell behind the offered rate ({reason})"
    return reason or "unknown"


def replicas_for(target: float, rate: float | None, headroom: float) -> int | None:
    """Servers needed to carry ``target`` req/s, each at ``(1 - headroom)`` of ``rate``."""
    if rate is None or rate <= 0:
        return None
    return max(1, math.ceil(target / (rate * (1.0 - headroom)) - 1e-9))


def size(result: dict, target_rps: float | None = None, headroom: float = 0.2,
         price_per_hour: float | None = None) -> Sizing:
    """The capacity ``result`` (``rate_search.summary`` with window figures) as a fleet."""
    if not 0 <= headroom < 1:
        raise ValueError(f"headroom {headroom} must be in [0, 1)")
    rate, failing_rate = result.get("capacity_rps"), result.get("first_failing_rps")
    steps = result.get("steps") or []
    passed = next((s for s in steps if s.get("rate") == rate and s.get("passed")), None)
    failing = next((s for s in steps if s.get("rate") == failing_rate
                    and not s.get("passed")), None)
    tokens = None
    if passed and passed.get("output_tok_s") and passed.get("qps"):
        tokens = passed["output_tok_s"] / passed["qps"]
    per_server = rate
    if rate is not None and passed and passed.get("goodput_qps") is not None:
        per_server = min(rate, passed["goodput_qps"])
    replicas = replicas_for(target_rps, per_server, headroom) if target_rps else None
    optimistic = replicas_for(target_rps, failing_rate, headroom) if target_rps else None
    servers = replicas if target_rps else (1 if rate else None)
    carried = target_rps if target_rps else per_server
    cost_hour = servers * price_per_hour if price_per_hour and servers else None
    per_million = None
    if cost_hour and tokens and carried:
        per_million = cost_hour / (carried * tokens * 3600.0) * 1e6
    return Sizing(rate, per_server, (rate, failing_rate), binding_limit(failing), target_rps,
                  headroom, replicas, optimistic, tokens, price_per_hour, cost_hour,
                  per_million)
