"""The load's clock: the event loop's monotonic time as wall-clock epoch seconds, and the
loop's lag, which is the client's timing resolution.

Every SSE event of one socket read gets that read's stamp (``load.stream.StreamState``). How
late a read can be is how late the event loop runs: when the client's core is busy (the API
server shares it, or the loop is parsing other streams), bytes wait in the socket and arrive
in the program together. :class:`LoopLag` measures that directly: a tick scheduled every
``TICK_S`` records how late it woke. A request's ``read_lag_s`` is the worst lag while it was
in flight; a span of a request shorter than that lag is below the client's resolution.
"""

from __future__ import annotations

import asyncio
import bisect
import math
import time
from array import array
from typing import Any

from model_optimizer.load.stats import percentile

TICK_S = 0.01
MAX_TICKS = 1 << 20  # ~3 hours at 100 Hz; older ticks are dropped in halves (16 MB at most)


class Clock:
    """The event loop's clock (arrivals sleep by it too) as wall-clock epoch seconds."""

    def __init__(self) -> None:
        self.perf = asyncio.get_running_loop().time
        self._wall_anchor, self._perf_anchor = time.time(), self.perf()

    def wall(self, perf: float) -> float:
        return self._wall_anchor + (perf - self._perf_anchor)


def parse_request_rate(value: Any) -> float | None:
    """Requests/s as a float, or None for ``'inf'`` (send as fast as concurrency allows)."""
    if value is None or value == "inf":
        return None
    rate = float(value)
    if math.isinf(rate):
        return None
    if rate <= 0:
        raise ValueError(f"request_rate must be positive or 'inf', got {value!r}")
    return rate


class LoopLag:
    """How late the event loop wakes, tick by tick (perf seconds of the loop's clock)."""

    def __init__(self, perf) -> None:
        self.perf = perf
        self.times = array("d")
        self.lags = array("d")

    async def run(self) -> None:
        """Tick until cancelled."""
        while True:
            expected = self.perf() + TICK_S
            await asyncio.sleep(TICK_S)
            now = self.perf()
            if len(self.times) >= MAX_TICKS:
                del self.times[:MAX_TICKS // 2]
                del self.lags[:MAX_TICKS // 2]
            self.times.append(now)
            self.lags.append(max(0.0, now - expected))

    def worst_between(self, start: float, end: float) -> float | None:
        """The largest lag of the ticks from ``start`` to the first tick after ``end`` (that
        tick's lateness covers ``end``); None without ticks there."""
        first = bisect.bisect_left(self.times, start)
        last = min(bisect.bisect_right(self.times, end) + 1, len(self.times))
        return max(self.lags[first:last]) if last > first else None

    def summary(self, start: float, end: float) -> dict[str, float | None]:
        """Lag percentiles (ms) of the ticks between ``start`` and ``end``."""
        first = bisect.bisect_left(self.times, start)
        last = bisect.bisect_right(self.times, end)
        lags = list(self.lags[first:last])
        shown = {"p50": percentile(lags, 50), "p99": percentile(lags, 99),
                 "max": max(lags) if lags else None}
        return {f"client_lag_{k}_ms": None if v is None else v * 1000.0
                for k, v in shown.items()}
