"""Warm-up until throughput is steady: measured, not a fixed count of requests.

A fresh vLLM CPU server runs its first minutes at a fraction of its later pace (measured
2026-12-04: 15.0 then 44.3 req/s a minute apart on one server), so a fixed warm-up of a few
requests leaves the ramp inside the measured window. After ``warmup_requests``, the warm-up
goes on in rounds of :data:`ROUND_S` seconds, counting the tokens streamed in each (tokens,
not completions: a closed loop of equal requests finishes them in waves, so completions per
round jump by a wave while the token rate is smooth). It is **steady** when the last
:data:`STEADY_ROUNDS` rounds' rates all lie within :data:`STEADY_SPREAD` of their mean and
the first of them differs from the last by less than that spread too (a ramp of 5% a round
is still a ramp). It gives up at ``warmup_steady_max_s`` (reported as not steady), or after
a whole round in which no token streamed (a failing server: the measured window then shows
why). The rounds, the time it took and the verdict go into the run's figures (``warmup``).

On a GPU the warm-up also waits for the **card**: a :class:`CardGate` (``telemetry.cardwatch``:
temperature and SM clock steady, at most ``warmup_card_max_s``) is polled beside the rounds,
and the warm-up ends once it is decided and the throughput's last rounds are steady then (or
its time is out); a server that streamed nothing for a round ends it at once. Its verdict
goes into the figures too (``warmup.card``).
"""

from __future__ import annotations

from typing import Any, Protocol

ROUND_S = 3.0
STEADY_ROUNDS = 3
STEADY_SPREAD = 0.10
NO_TOKENS = "no tokens streamed"


class CardGate(Protocol):
    """What the warm-up waits for besides throughput (``telemetry.cardwatch.CardWatch``)."""

    def begin(self) -> None:
        """The warm-up starts now."""

    def done(self) -> bool:
        """Whether the gate is decided (steady, out of time, or nothing to check)."""

    def summary(self) -> dict[str, Any]:
        """What the figures record of it."""


class SteadyWarmup:
    """Counts warm-up completions per round (perf seconds of the load's clock); with a
    ``card`` gate, also waits for it."""

    def __init__(self, start: float, max_s: float, card: CardGate | None = None) -> None:
        self.start, self.max_s, self.card = start, max_s, card
        self.counts: dict[int, int] = {}  # round -> tokens streamed in it
        self.verdict: str | None = None  # throughput: "steady" / "not steady" once decided
        self.steady_at: float | None = None  # when the throughput first read decided
        self.decided_at: float | None = None  # when the warm-up ended
        if card is not None:
            card.begin()

    def streamed(self, tokens: int, now: float) -> None:
        """``tokens`` content chunks of a warm-up request were read at ``now``."""
        if tokens > 0 and now >= self.start:
            index = int((now - self.start) // ROUND_S)
            self.counts[index] = self.counts.get(index, 0) + tokens

    def rates(self, now: float) -> list[float]:
        """Tokens/s of each whole round so far."""
        rounds = int((now - self.start) // ROUND_S)
        return [self.counts.get(index, 0) / ROUND_S for index in range(rounds)]

    def _throughput(self, now: float) -> str | None:
        """The throughput verdict at ``now``, None while undecided."""
        rates = self.rates(now)[-STEADY_ROUNDS:]
        if rates and rates[-1] == 0:  # a whole round without a token: nothing to wait for
            return NO_TOKENS
        if len(rates) == STEADY_ROUNDS:
            mean = sum(rates) / len(rates)
            if (all(abs(rate - mean) <= STEADY_SPREAD * mean for rate in rates)
                    and abs(rates[-1] - rates[0]) < STEADY_SPREAD * mean):
                return "steady"
        return "not steady" if now - self.start >= self.max_s else None

    def done(self, now: float) -> bool:
        """Whether to stop warming up now: the card gate (when there is one) decided, and
        the throughput steady *then* (its last rounds) or out of time; decides once. A
        throughput that was steady while the card still warmed is read again: a card that
        settles lower slows the server with it."""
        if self.decided_at is not None:
            return True
        card_done = self.card is None or self.card.done()  # polled always: its own clock
        verdict = self._throughput(now)
        if verdict is not None and self.steady_at is None:
            self.steady_at = now
        if verdict is None or (verdict != NO_TOKENS and not card_done):
            return False
        self.verdict, self.decided_at = verdict, now
        return True

    def summary(self, loop_lag_s: float | None = None) -> dict[str, Any]:
        """What the figures record of the warm-up. ``loop_lag_s``: the client loop's worst
        lag while it ran; the verdict is reached on a poll, so a warm-up out of time ends
        late by up to that lag (a busy machine), and the figures say so."""
        end = self.decided_at if self.decided_at is not None else self.start
        summary: dict[str, Any] = {
            "verdict": self.verdict, "seconds": round(end - self.start, 2),
            "loop_lag_max_s": None if loop_lag_s is None else round(loop_lag_s, 3),
            "round_tok_s": [round(rate, 1) for rate in self.rates(end)],
            "rule": f"tokens per {ROUND_S:g} s round; steady when the last {STEADY_ROUNDS} "
                    f"lie within {STEADY_SPREAD:.0%} of their mean, first to last too"}
        if self.card is not None:
            summary["card"] = self.card.summary()
        return summary
