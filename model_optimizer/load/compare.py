"""How a trace differs from a recipe's workload, and whether it differs enough to re-validate.

Both sides are reduced to one :class:`Profile`: prompt and output lengths (p50, p90, in
tokens; a session's turn counts its whole conversation, as the server sees it), the request
rate, burstiness (the coefficient of variation of the gaps between arrivals: 1 for Poisson
arrivals, 0 for a metronome, above 1 for bursts) and the shared-prefix share (of all prompt
tokens, those a request shares with an earlier one by construction: a session's conversation
so far, or ``shared_prefix_tokens``).

The rule, in one place (:data:`REVALIDATE`): re-validate when a length percentile or the
rate differs by more than the ratio (either way), the burstiness by more than its absolute
difference, or the shared-prefix share by more than its. A closed-loop recipe
(``request_rate: inf``) has no rate of its own: rate and burstiness are then not compared
(``mopt capacity`` says which rate the recipe holds).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from model_optimizer.load.clock import parse_request_rate
from model_optimizer.load.stats import percentile
from model_optimizer.load.trace import Trace, parse_speed
from model_optimizer.mix import MixSampler, parse_mix

#: the re-validation rule (module docstring)
REVALIDATE = {"length_ratio": 1.5, "rate_ratio": 1.5, "burstiness_diff": 0.5,
              "prefix_share_diff": 0.2}
MIX_SAMPLES = 4000  # draws of a mix for its percentiles


@dataclass(frozen=True)
class Profile:
    """One workload reduced to the figures the comparison reads (module docstring)."""

    requests: int | None
    prompt_p50: float | None
    prompt_p90: float | None
    output_p50: float | None
    output_p90: float | None
    rate_qps: float | None  # None: a closed loop
    burstiness: float | None  # CV of inter-arrival gaps; None: a closed loop
    prefix_share: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def burstiness(times: list[float]) -> float | None:
    """The coefficient of variation of the gaps between sorted arrival ``times``."""
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    if len(gaps) < 2 or statistics.fmean(gaps) <= 0:
        return None
    return statistics.pstdev(gaps) / statistics.fmean(gaps)


def trace_profile(trace: Trace, count_text: Callable[[str], int], speed: float = 1.0) -> Profile:
    """The profile of ``trace`` replayed at ``speed``; ``count_text`` measures a text prompt."""
    own = [entry.prompt_tokens or count_text(entry.prompt or "") for entry in trace.entries]
    context: list[int] = []
    sent, shared = [], 0
    for index, entry in enumerate(trace.entries):
        before = 0 if entry.previous is None else context[entry.previous]
        context.append(before + own[index] + entry.output_tokens)
        sent.append(before + own[index])
        shared += before
    outputs = [entry.output_tokens for entry in trace.entries]
    rate = trace.rate()
    return Profile(len(trace.entries), percentile(sent, 50), percentile(sent, 90),
                   percentile(outputs, 50), percentile(outputs, 90),
                   None if rate is None else rate * speed,
                   burstiness([entry.at_s for entry in trace.entries]),
                   shared / sum(sent) if sum(sent) else 0.0)


def synthetic_profile(workload: Mapping[str, Any]) -> Profile:
    """The profile of a fixed or mix workload (a dataset or trace is read by the caller)."""
    rate = parse_request_rate(workload.get("request_rate", "inf"))
    if workload.get("mix"):
        sampler = MixSampler(parse_mix(workload["mix"]), int(workload.get("seed") or 0))
        draws = [sampler.draw(index) for index in range(MIX_SAMPLES)]
        prompts = [float(draw.prompt_tokens) for draw in draws]
        outputs = [float(draw.output_tokens) for draw in draws]
        share = 0.0
    else:
        prompts = [float(workload["prompt_tokens"])]
        outputs = [float(workload["output_tokens"])]
        share = (workload.get("shared_prefix_tokens") or 0) / workload["prompt_tokens"]
    return Profile(workload.get("num_requests"), percentile(prompts, 50),
                   percentile(prompts, 90), percentile(outputs, 50), percentile(outputs, 90),
                   rate, None if rate is None else 1.0, share)


def workload_profile(workload: Mapping[str, Any], read: Callable[[str], Trace],
                     count_text: Callable[[str], int],
                     dataset_lengths: Callable[[], tuple[list[int], list[int]]]) -> Profile:
    """The profile of any workload form: ``read`` a trace path, ``dataset_lengths`` the
    (prompt, output) lengths of its dataset."""
    if workload.get("trace"):
        return trace_profile(read(workload["trace"]), count_text,
                             parse_speed(workload.get("trace_speed") or 1))
    if workload.get("dataset"):
        prompts, outputs = dataset_lengths()
        rate = parse_request_rate(workload.get("request_rate", "inf"))
        return Profile(workload.get("num_requests"), percentile(prompts, 50),
                       percentile(prompts, 90), percentile(outputs, 50),
                       percentile(outputs, 90), rate, None if rate is None else 1.0, 0.0)
    return synthetic_profile(workload)


def _ratio_off(trace: float | None, recipe: float | None, limit: float) -> float | None:
    """The ratio (>= 1) between two positive figures when it exceeds ``limit``."""
    if not trace or not recipe:
        return None
    ratio = max(trace / recipe, recipe / trace)
    return ratio if ratio > limit else None


def compare(trace: Profile, recipe: Profile) -> dict[str, Any]:
    """Rows side by side and the verdict: ``revalidate`` and its ``reasons`` (the rule is
    :data:`REVALIDATE`)."""
    reasons = []
    for key in ("prompt_p50", "prompt_p90", "output_p50", "output_p90"):
        ratio = _ratio_off(getattr(trace, key), getattr(recipe, key), REVALIDATE["length_ratio"])
        if ratio is not None:
            reasons.append(f"{key} {getattr(trace, key):g} vs {getattr(recipe, key):g} tokens "
                           f"({ratio:.2f}x, over {REVALIDATE['length_ratio']}x)")
    closed = recipe.rate_qps is None
    if not closed:
        ratio = _ratio_off(trace.rate_qps, recipe.rate_qps, REVALIDATE["rate_ratio"])
        if ratio is not None:
            reasons.append(f"rate {trace.rate_qps:.3g} vs {recipe.rate_qps:.3g} req/s "
                           f"({ratio:.2f}x, over {REVALIDATE['rate_ratio']}x)")
        diff = _diff(trace.burstiness, recipe.burstiness)
        if diff is not None and diff > REVALIDATE["burstiness_diff"]:
            reasons.append(f"burstiness (CV of gaps) {trace.burstiness:.2f} vs "
                           f"{recipe.burstiness:.2f} (over ±{REVALIDATE['burstiness_diff']})")
    diff = abs(trace.prefix_share - recipe.prefix_share)
    if diff > REVALIDATE["prefix_share_diff"]:
        reasons.append(f"shared-prefix share {trace.prefix_share:.0%} vs "
                       f"{recipe.prefix_share:.0%} (over ±{REVALIDATE['prefix_share_diff']:.0%})")
    notes = (["the recipe runs a closed loop (request_rate: inf): rate and burstiness not "
              "compared; mopt capacity finds the rate it holds"] if closed else [])
    return {"trace": trace.to_dict(), "recipe": recipe.to_dict(), "rule": dict(REVALIDATE),
            "revalidate": bool(reasons), "reasons": reasons, "notes": notes}


def _diff(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or math.isnan(a - b) else abs(a - b)
