"""An asyncio event loop whose clock is fast-forwarded: timing tests that do not depend on
the machine's speed.

The loop's clock moves only when nothing can run: no callback is ready, no socket has
anything to read or write, and some task waits on a timer. Then it jumps straight to that
timer. Code and loopback I/O take no time on it, sleeps take exactly their length, so a
client and a server on one such loop (``MockServer.in_this_loop``) read exactly the delays
the server injects, however busy the machine is. (Loopback data is in the peer's socket by
the time ``send`` returns, so "nothing readable" means "nothing in flight"; a short real
grace covers a kernel that defers it.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")
IO_GRACE_S = 0.0005  # real seconds to wait for I/O before the clock may jump


class FastForwardLoop(asyncio.SelectorEventLoop):
    """See the module docstring; ``time()`` starts at 0."""

    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0
        self.jumps = 0
        self._real_select = self._selector.select
        self._selector.select = self._select  # type: ignore[method-assign]

    def time(self) -> float:
        return self._now

    def _select(self, timeout: float | None = None):
        ready = self._real_select(0)
        if ready or timeout == 0:
            return ready
        ready = self._real_select(IO_GRACE_S)
        if ready:
            return ready
        if timeout is None:  # no timer: only I/O can wake the loop
            return self._real_select(None)
        self._now += timeout  # every task waits on a timer: jump to the nearest one
        self.jumps += 1
        return []


def run_fast_forwarded(main: Callable[[], Awaitable[T]]) -> T:
    """``main()`` run to completion on a fresh :class:`FastForwardLoop`."""
    loop = FastForwardLoop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
