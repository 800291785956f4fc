"""Back-off when a server refuses requests: HTTP 429, or 503 with ``Retry-After``.

A server that answers "too many requests" is not hammered: sending pauses for what its
``Retry-After`` asks (seconds or an HTTP date; a 429 without one: ``DEFAULT_PAUSE_S``), at
most ``RETRY_AFTER_CAP_S`` at a time, so a server that asks for an hour cannot stall a run
for one. A server that keeps refusing ends the load: refusals for ``GIVE_UP_S`` with no
request succeeding since the first of them stop it with a reason (``give_up_reason``), and
the run is classified like any run whose requests failed. The load client
(``model_optimizer.load.client``) calls ``refused`` for each refusal, ``succeeded`` for each
ok request, ``pause`` before sending, and polls ``give_up_reason``.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping
from email.utils import parsedate_to_datetime

RETRY_AFTER_CAP_S = 10.0  # the longest one pause, whatever Retry-After says
DEFAULT_PAUSE_S = 1.0  # a 429 without a usable Retry-After
GIVE_UP_S = 60.0  # refused for this long, nothing succeeding: the load stops
_REFUSING = (429, 503)


def retry_after_s(value: str | None, now_wall: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` value asks for (delta seconds or an HTTP date), None when it
    is missing or unreadable."""
    if value is None:
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            moment = parsedate_to_datetime(text).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        seconds = moment - (time.time() if now_wall is None else now_wall)
    return max(0.0, seconds) if math.isfinite(seconds) else None


class Backoff:
    """When sending may resume, and how long the server has been refusing."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock  # monotonic seconds (the load's event-loop clock)
        self.resume_at: float | None = None
        self.streak_since: float | None = None
        self.refusals = 0
        self.last: str | None = None

    def refused(self, status: int, headers: Mapping[str, str]) -> None:
        """Note a refusal (a 429, or a 503 with Retry-After); other answers are ignored."""
        asked = retry_after_s(headers.get("Retry-After"))
        if status not in _REFUSING or (status == 503 and asked is None):
            return
        now = self._clock()
        pause = min(RETRY_AFTER_CAP_S, DEFAULT_PAUSE_S if asked is None else asked)
        self.resume_at = max(self.resume_at or now, now + pause)
        if self.streak_since is None:
            self.streak_since = now
        self.refusals += 1
        shown = headers.get("Retry-After")
        self.last = f"HTTP {status}" + (f", Retry-After: {shown[:40]}" if shown else "")

    def succeeded(self) -> None:
        """A request succeeded: the server is not refusing (the streak ends)."""
        self.streak_since, self.refusals = None, 0

    async def pause(self, deadline: float | None = None) -> bool:
        """Sleep until sending may resume (not past ``deadline``); True when it slept."""
        now = self._clock()
        if self.resume_at is None or self.resume_at <= now:
            return False
        wake = self.resume_at if deadline is None else min(self.resume_at, deadline)
        await asyncio.sleep(max(0.0, wake - now))
        return True

    def give_up_reason(self) -> str | None:
        """Why the load should stop, once the server has refused for ``GIVE_UP_S``."""
        if self.streak_since is None or self._clock() - self.streak_since < GIVE_UP_S:
            return None
        return (f"the server kept refusing requests for {GIVE_UP_S:g} s ({self.refusals} "
                f"refusals, last {self.last}; mopt paused at most {RETRY_AFTER_CAP_S:g} s "
                "at a time)")
