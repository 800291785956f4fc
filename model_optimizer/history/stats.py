"""Is a difference between two runs beyond noise? The tests ``mopt diff`` uses.

Latencies (TTFT, TPOT, E2E) have one sample per request, so two runs are compared with the
**Mann-Whitney U test** (two-sided), implemented here with its normal approximation, tie
correction and continuity correction: the same figures as SciPy's
``mannwhitneyu(a, b, alternative="two-sided", method="asymptotic", use_continuity=True)``,
without the dependency. The approximation is good from about 8 samples per side; below
:data:`MIN_SAMPLES` mopt does not judge.

Throughput (QPS, output tok/s) has one value per run. mopt judges it with a **block
bootstrap over the run's completion gaps**: the measured window is the sum of the gaps
between successive request completions (the first gap starts at the first request sent), so
``QPS = completed / sum(gaps)``. Gaps are resampled in circular blocks of ``concurrency``
consecutive gaps (a closed loop completes requests in bursts of up to that many, and blocks
keep a burst together), the rate of each resample computed, and the percentile interval of
the ratio B/A taken at ``1 - alpha``. This measures the *within-run* noise only: two runs
on a machine whose load changed between them can differ by more than that, which only
repeated runs can show (the output says so).

A difference is called **significant** only when the test rejects at ``alpha`` (0.01) *and*
the relative change of the median (latency) or rate (throughput) is at least
:data:`MIN_EFFECT` (10%) *and* at least the runs' own **drift**: how far the median (rate)
of each run's second half of requests is from its first half's. With hundreds of requests a
1% shift is "statistically significant" and still meaningless for tuning (airspeed velocity
and pyperf judge the same way): that is reported as ``small``. A change that the runs'
own halves already show (the machine's load changed during the runs) cannot be blamed on
the configuration: that is reported as ``unstable``.

When the client reads late (its core is busy), a request's chunks wait in the socket and
reach it in one read: vLLM sent them apart, but the client cannot time the gaps. When more
than :data:`COALESCED_LIMIT` of a run's requests could not be timed so, its TPOT does not
measure decoding and is not judged (:func:`coalesced_fraction`, the load's own rule:
``load.stats.tpot_measurable``).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from statistics import median

from model_optimizer.load.stats import UNMEASURABLE_LIMIT, tpot_coverage

ALPHA = 0.01
MIN_EFFECT = 0.10
MIN_SAMPLES = 8
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240601


@dataclass(frozen=True)
class Judgement:
    """The verdict on one metric: the test used, its statistic, and the words for humans."""

    test: str
    significant: bool
    verdict: str  # significant | small | unstable | not significant | not judged | run-to-run noise
    p_value: float | None = None
    interval: tuple[float, float] | None = None   # bootstrap CI of the ratio B/A
    note: str = ""

    def to_dict(self) -> dict:
        """JSON form."""
        return {"test": self.test, "significant": self.significant, "verdict": self.verdict,
                "p_value": self.p_value,
                "interval": list(self.interval) if self.interval else None, "note": self.note}


def _ranks(values: list[float]) -> tuple[list[float], float]:
    """Average ranks (1-based) of ``values`` and the tie term sum(t^3 - t)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    ties = 0.0
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        count = end - start + 1
        ties += count ** 3 - count
        start = end + 1
    return ranks, ties


def mann_whitney_u(a: list[float], b: list[float]) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test: ``(U of a, p-value)``, normal approximation.

    Tie-corrected variance and a continuity correction of 0.5, as SciPy's asymptotic method.
    """
    n1, n2 = len(a), len(b)
    if not n1 or not n2:
        raise ValueError("Mann-Whitney U needs samples on both sides")
    ranks, ties = _ranks(list(a) + list(b))
    u1 = sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    n = n1 + n2
    variance = n1 * n2 / 12 * ((n + 1) - ties / (n * (n - 1)))
    if variance <= 0:
        return u1, 1.0
    z = max(abs(u1 - n1 * n2 / 2) - 0.5, 0.0) / math.sqrt(variance)
    return u1, min(1.0, math.erfc(z / math.sqrt(2)))


def relative_change(a: float | None, b: float | None) -> float | None:
    """(b - a) / a, None when undefined."""
    if a is None or b is None or a == 0:
        return None
    return (b - a) / a


def _size(a: float, b: float) -> float:
    """|relative change| from a to b; infinite from 0 to anything else."""
    if a == b:
        return 0.0
    return abs(b - a) / abs(a) if a else math.inf


def _percent(size: float) -> str:
    return f"{size:.0%}" if math.isfinite(size) else "more than 100x"


def half_drift(values: list[float]) -> float:
    """|change| of the median from the first to the second half of time-ordered samples."""
    if len(values) < MIN_SAMPLES:
        return 0.0
    middle = len(values) // 2
    return _size(median(values[:middle]), median(values[middle:]))


def rate_drift(gaps: list[tuple[float, float]]) -> float:
    """|change| of the rate from the first to the second half of the completion gaps."""
    if len(gaps) < MIN_SAMPLES:
        return 0.0
    middle = len(gaps) // 2
    rates = [sum(w for _, w in part) / sum(g for g, _ in part) if sum(g for g, _ in part)
             else math.inf for part in (gaps[:middle], gaps[middle:])]
    return 0.0 if math.inf in rates else _size(rates[0], rates[1])


def judge_samples(a: list[float], b: list[float], alpha: float = ALPHA,
                  min_effect: float = MIN_EFFECT) -> Judgement:
    """Mann-Whitney U verdict on per-request samples (each side in the order sent), with
    the minimum effect and the drift floor applied to the change of the median."""
    test = "Mann-Whitney U (two-sided)"
    if len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
        return Judgement(test, False, "not judged",
                         note=f"fewer than {MIN_SAMPLES} samples on a side")
    _, p_value = mann_whitney_u(a, b)
    return _verdict(test, p_value < alpha, _size(median(a), median(b)), min_effect,
                    max(half_drift(a), half_drift(b)), p_value=p_value)


def _verdict(test: str, rejected: bool, size: float, min_effect: float, drift: float,
             **extra) -> Judgement:
    if not rejected:
        return Judgement(test, False, "not significant", **extra)
    if size < min_effect:
        return Judgement(test, False, "small",
                         note=f"beyond noise but under {min_effect:.0%}", **extra)
    if size < drift:
        return Judgement(test, False, "unstable",
                         note=f"the runs themselves drifted by {_percent(drift)} between "
                              "their halves", **extra)
    return Judgement(test, True, "significant", **extra)


COALESCED_LIMIT = UNMEASURABLE_LIMIT


def coalesced_fraction(records: list[dict]) -> float:
    """Share of completed multi-token requests whose decode the client could not time (all
    content in one socket read, or a span within its read lag: ``tpot_measurable``). TTFT,
    E2E and throughput stay meaningful; per-request TPOT does not."""
    unmeasurable, multi = tpot_coverage([r for r in records if r.get("ok")])
    return unmeasurable / multi if multi else 0.0


def completion_gaps(records: list[dict], weight: str | None = None) -> list[tuple[float, float]]:
    """``(gap_s, weight)`` per completed request, in completion order.

    The first gap runs from the first measured request sent; the weight is 1 per request,
    or the record's ``weight`` field (e.g. ``output_tokens``).
    """
    measured = [r for r in records if not r.get("warmup")]
    done = [r for r in measured if r.get("ok") and r.get("e2e_s") is not None]
    if not done:
        return []
    start = min(r["sent_at"] for r in measured)
    ordered = sorted(done, key=lambda r: r["sent_at"] + r["e2e_s"])
    gaps, previous = [], start
    for record in ordered:
        finished = record["sent_at"] + record["e2e_s"]
        gaps.append((max(finished - previous, 0.0),
                     float(record.get(weight) or 0) if weight else 1.0))
        previous = finished
    return gaps


def _block_sums(gaps: list[tuple[float, float]], block: int) -> list[tuple[float, float]]:
    """Sums of every circular run of ``block`` consecutive (gap, weight) pairs."""
    n = len(gaps)
    doubled = gaps + gaps[:block]
    out = []
    time_sum = sum(g for g, _ in doubled[:block])
    weight_sum = sum(w for _, w in doubled[:block])
    for start in range(n):
        out.append((time_sum, weight_sum))
        time_sum += doubled[start + block][0] - doubled[start][0]
        weight_sum += doubled[start + block][1] - doubled[start][1]
    return out


def bootstrap_rates(gaps: list[tuple[float, float]], block: int, resamples: int,
                    rng: random.Random) -> list[float]:
    """Rates (weight per second) of circular block-bootstrap resamples of ``gaps``."""
    block = max(1, min(block, len(gaps)))
    sums = _block_sums(gaps, block)
    draws = max(1, round(len(gaps) / block))
    rates = []
    for _ in range(resamples):
        total_s = total_w = 0.0
        for _ in range(draws):
            seconds, weight = sums[rng.randrange(len(sums))]
            total_s += seconds
            total_w += weight
        rates.append(total_w / total_s if total_s > 0 else math.inf)
    return rates


def judge_rate(gaps_a: list[tuple[float, float]], gaps_b: list[tuple[float, float]],
               rate_a: float | None, rate_b: float | None, blocks: tuple[int, int],
               alpha: float = ALPHA, min_effect: float = MIN_EFFECT) -> Judgement:
    """Block-bootstrap verdict on a throughput: the ``1 - alpha`` interval of B/A."""
    test = "block bootstrap of completion gaps"
    if len(gaps_a) < MIN_SAMPLES or len(gaps_b) < MIN_SAMPLES or not rate_a or rate_b is None:
        return Judgement(test, False, "not judged",
                         note=f"fewer than {MIN_SAMPLES} completions on a side")
    rng = random.Random(BOOTSTRAP_SEED)
    rates_a = bootstrap_rates(gaps_a, blocks[0], BOOTSTRAP_RESAMPLES, rng)
    rates_b = bootstrap_rates(gaps_b, blocks[1], BOOTSTRAP_RESAMPLES, rng)
    ratios = sorted(b / a if a > 0 else math.inf for a, b in zip(rates_a, rates_b, strict=True))
    low = ratios[int(alpha / 2 * (len(ratios) - 1))]
    high = ratios[int(math.ceil((1 - alpha / 2) * (len(ratios) - 1)))]
    rejected = low > 1 or high < 1
    return _verdict(test, rejected, _size(rate_a, rate_b), min_effect,
                    max(rate_drift(gaps_a), rate_drift(gaps_b)), interval=(low, high))
