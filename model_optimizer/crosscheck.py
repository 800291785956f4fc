"""The client's figures checked against the server's own, and whether the client kept up.

Two questions about every measured window, answered from what the load and the telemetry
layers recorded (this module is where they meet, below the runner):

- **Do the client's latencies match vLLM's?** vLLM's histograms of the same window
  (``telemetry.histograms``: scraped when the window opened and closed) give the server's
  exact mean TTFT, TPOT and E2E. The client's means over the same requests are compared with
  them: they *agree* when the difference is within the client's resolution (its mean read lag
  over those requests, ``RequestRecord.read_lag_s``, at least :data:`MIN_RESOLUTION_MS`).
  When the client saw more, the side is named: the *client* when its read lag accounts for
  at least half the difference, else the *API server's path* (HTTP, tokenizing, streaming,
  which vLLM's engine-side histograms do not include).
- **Was the server fed?** While the client has a request in flight, the engine should hold
  it (queued or running). vLLM's histograms give the engine's time exactly: the sums of the
  queue and inference times of the window's requests are the integral of the requests it
  held. Over the sum of the client's in-flight times (its E2E) that is ``held_share``;
  ``starved_share = 1 - held_share`` is the share of the in-flight time the engine did not
  have the request (HTTP, tokenizing, streaming, a client reading late). A window starved
  above :data:`STARVED_LIMIT` is **client-bound**: its pace is the client's and the API
  server's, not the engine's. The running and waiting gauges sampled beside the load give
  ``gauge_starved_share`` (samples holding fewer than the intended concurrency), shown for
  reference only: vLLM refreshes them once per engine step, so a long step (a prefill of a
  whole wave) leaves a stale count in every sample taken during it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from model_optimizer.load.stats import record_field, request_tpot_s
from model_optimizer.telemetry.histograms import Histogram

MIN_RESOLUTION_MS = 1.0
STARVED_LIMIT = 0.10
COMPARED = ("ttft", "tpot", "e2e")


def _client_values_s(records: Sequence[Any], metric: str) -> list[float]:
    ok = [r for r in records if record_field(r, "ok")]
    if metric == "tpot":
        return [v for v in (request_tpot_s(r) for r in ok) if v is not None]
    return [record_field(r, f"{metric}_s") for r in ok if record_field(r, f"{metric}_s")
            is not None]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def compare_latency(records: Sequence[Any], server: Mapping[str, Histogram] | None
                    ) -> dict[str, Any] | None:
    """Client vs server means (ms) per figure with a verdict; None without the server's."""
    if server is None:
        return None
    ok = [r for r in records if record_field(r, "ok")]
    lags = [record_field(r, "read_lag_s") for r in ok if record_field(r, "read_lag_s")
            is not None]
    lag_ms = (_mean(lags) or 0.0) * 1000.0
    resolution_ms = max(lag_ms, MIN_RESOLUTION_MS)
    rows: dict[str, Any] = {}
    for metric in COMPARED:
        client_values = _client_values_s(ok, metric)
        client = _mean(client_values)
        hist = server.get(metric)
        server_mean = hist.mean() if hist is not None else None
        p50 = hist.quantile(0.5) if hist is not None else None
        rows[metric] = _row(client, len(client_values), server_mean,
                            hist.count if hist is not None else 0, p50, lag_ms, resolution_ms)
    queue = server.get("queue")
    itl = server.get("itl")
    return {"figures": rows, "client_read_lag_mean_ms": lag_ms, "resolution_ms": resolution_ms,
            "server_queue_mean_ms": _ms(queue.mean()) if queue is not None else None,
            "server_itl_mean_ms": _ms(itl.mean()) if itl is not None else None,
            "server_requests": server["e2e"].count if "e2e" in server else None,
            "client_requests": len(ok)}


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def _row(client_s: float | None, client_n: int, server_s: float | None, server_n: float,
         p50: tuple[float, float] | None, lag_ms: float, resolution_ms: float) -> dict:
    row = {"client_mean_ms": _ms(client_s), "client_requests": client_n,
           "server_mean_ms": _ms(server_s), "server_requests": int(server_n),
           "server_p50_ms": _ms(p50[0]) if p50 else None,
           "server_p50_resolution_ms": _ms(p50[1]) if p50 else None}
    if client_s is None or server_s is None:
        row.update(verdict="not compared", side=None, difference_ms=None)
        return row
    difference = (client_s - server_s) * 1000.0
    row["difference_ms"] = difference
    if abs(difference) <= resolution_ms:
        row.update(verdict="agree", side=None)
    elif difference > 0:
        side = "client" if lag_ms >= difference / 2 else "API server's path"
        row.update(verdict="client saw more", side=side)
    else:
        row.update(verdict="server reports more", side="server")
    return row


def _gauge_share(series: Sequence[Mapping[str, Any]], start: float | None,
                 end: float | None, intended: int | None) -> tuple[float | None, int]:
    if not intended or start is None or end is None:
        return None, 0
    held = [(s.get("num_requests_running") or 0) + (s.get("num_requests_waiting") or 0)
            for s in series if start <= (s.get("t") or 0) <= end
            and s.get("num_requests_running") is not None]
    if not held:
        return None, 0
    return sum(1 for n in held if n < intended) / len(held), len(held)


def feed(records: Sequence[Any], server: Mapping[str, Histogram] | None,
         series: Sequence[Mapping[str, Any]], start: float | None, end: float | None,
         intended: int | None) -> dict[str, Any]:
    """Whether the engine held the requests the client had in flight (module docstring).
    ``start``/``end`` bound the gauge samples (the steady window); ``intended`` is the
    closed loop's concurrency (None: an open loop, no gauge share)."""
    gauge, samples = _gauge_share(series, start, end, intended)
    found: dict[str, Any] = {"held_share": None, "starved_share": None, "client_bound": None,
                             "gauge_starved_share": gauge, "samples": samples,
                             "intended": intended}
    in_flight_s = sum(record_field(r, "e2e_s") or 0.0 for r in records
                      if record_field(r, "ok"))
    if server is None or "inference" not in server or in_flight_s <= 0:
        return found
    held_s = server["inference"].total + (server["queue"].total if "queue" in server else 0.0)
    held = min(held_s / in_flight_s, 1.0)
    found.update(held_share=held, starved_share=1.0 - held,
                 client_bound=1.0 - held > STARVED_LIMIT)
    return found
