"""Where the requests went: what each instance served (its own ``/metrics``) against what
the routing rules sent it (each request's class and length), and figures per instance.

An instance's count is the increase of ``vllm:request_success_total`` (every finish reason)
over the load, warm-up included, read from the instance itself, never from the router. The
rules' count replays each request sent, warm-up included, through ``router.expected_instance``
with the prompt length the instance reported (``usage``). A mismatch means the router did
not do what the fleet says: the run reports it and exits 4, like a missed SLO.

A balanced group (``mopt split --replicas``: no class rule, the router's strategy picks) has
no rule to replay: every request is counted under :data:`ANY_INSTANCE`, and the check is that
the instances' counts add up to what was sent and that each instance served some (a replica
the router never used is not a replica). Per-instance figures are then unknown (the client
does not see which replica answered); the run's own figures cover the group.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from model_optimizer.fleet.router import expected_instance
from model_optimizer.fleet.spec import ANY_INSTANCE, RouterSpec
from model_optimizer.httpcall import join_url
from model_optimizer.load.stats import summarize
from model_optimizer.telemetry.prometheus import scrape_counter

INSTANCE_FIGURES = ("requests", "completed", "failed", "qps", "output_tok_s", "ttft_p50_ms",
                    "ttft_p99_ms", "tpot_p50_ms", "e2e_p99_ms")
SETTLE_S = 3.0  # how long the counters may take to show the last requests


@dataclass
class Routed:
    """The requests sent, by the instance the rules send them to."""

    router: RouterSpec
    sent: dict[str, int] = field(default_factory=dict)  # warm-up included
    measured: dict[str, list] = field(default_factory=dict)  # the measured records
    unknown: int = 0  # requests whose length was unknown where length decides

    def add(self, record) -> None:
        """Count one finished request (a ``RequestRecord``)."""
        where = expected_instance(self.router, record.request_class, record.prompt_tokens)
        if where is None:
            self.unknown += 1
            return
        if record.ok:
            self.sent[where] = self.sent.get(where, 0) + 1
        if not record.warmup:
            self.measured.setdefault(where, []).append(record)


def read_counts(urls: Mapping[str, str]) -> dict[str, float | None]:
    """Each instance's finished-request counter now (None: unreadable)."""
    return {name: scrape_counter(join_url(url, "/metrics")) for name, url in urls.items()}


def served_since(urls: Mapping[str, str], before: Mapping[str, float | None],
                 expected: Mapping[str, int], settle_s: float = SETTLE_S,
                 clock: Callable[[], float] = time.monotonic) -> dict[str, int | None]:
    """What each instance served since ``before``, read until it matches ``expected`` or
    stops changing for ``settle_s`` (an engine counts a request a moment after it ends)."""
    deadline, last = clock() + settle_s, None
    while True:
        now = read_counts(urls)
        served = {name: None if now[name] is None or before.get(name) is None
                  else int(now[name] - before[name]) for name in urls}
        if settled(served, expected) or clock() > deadline \
                or (served == last and clock() > deadline - settle_s / 2):
            return served
        last = served
        time.sleep(0.2)


def settled(served: Mapping[str, int | None], expected: Mapping[str, int]) -> bool:
    """Every instance's count is what was expected of it (a balanced group: the counts add
    up to what was sent to the group)."""
    if ANY_INSTANCE in expected:
        counts = list(served.values())
        return None not in counts and sum(c or 0 for c in counts) == expected[ANY_INSTANCE]
    return all(served[n] == expected.get(n, 0) for n in served)


def instance_figures(routed: Routed, served: Mapping[str, int | None], window_s: float | None,
                     classes: Mapping[str, tuple[str, ...]]) -> dict[str, dict]:
    """Per instance: the classes routed there, requests sent and served, and the figures of
    the measured requests the rules sent it (in the run's window). In a balanced group no
    rule sends an instance anything (``sent_by_rules`` None); ``match`` is then "served
    some"."""
    if routed.router.balance is not None:
        return {name: {"classes": list(classes.get(name, ())), "sent_by_rules": None,
                       "served": count, "match": bool(count),
                       **dict.fromkeys(INSTANCE_FIGURES[2:])}
                for name, count in served.items()}
    out = {}
    for name in served:
        figures = summarize(routed.measured.get(name, []), window_s)
        sent = routed.sent.get(name, 0)
        out[name] = {"classes": list(classes.get(name, ())), "sent_by_rules": sent,
                     "served": served[name], "match": served[name] == sent,
                     **{key: figures.get(key) for key in INSTANCE_FIGURES}}
    return out


def routing_problems(instances: Mapping[str, dict], unknown: int,
                     balanced: int | None = None) -> list[str]:
    """One line per instance whose count differs from the rules' (and unknown lengths); a
    balanced group (``balanced``: the requests sent to it): :func:`balance_problems`."""
    if balanced is not None:
        return balance_problems(instances, balanced)
    out = []
    for name, item in instances.items():
        if not item["match"]:
            got = "an unreadable number of" if item["served"] is None else item["served"]
            out.append(f"{name} served {got} requests, the rules sent it "
                       f"{item['sent_by_rules']}")
    if unknown:
        out.append(f"{unknown} requests had no length to route by (no usage in the answer)")
    return out


def balance_problems(instances: Mapping[str, dict], sent: int) -> list[str]:
    """A balanced group: an instance that served nothing (or could not be read), and the
    counts not adding up to what was sent."""
    out = [f"{name} served {'an unreadable number of' if item['served'] is None else 'no'} "
           "requests: the router did not balance over it"
           for name, item in instances.items() if not item["served"]]
    total = sum(item["served"] or 0 for item in instances.values())
    if total != sent:
        out.append(f"the instances served {total} requests in all, {sent} were sent")
    return out
