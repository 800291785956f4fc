"""Fidelity of a candidate deployment to a baseline, from the same prompts; no labels needed.

Figures, per prompt and overall:

- **exact match**: the candidate generated the same token ids as the baseline (same seed and
  sampling). Overall: the share of prompts (``exact_match_rate``).
- **first divergence**: the position (0-based, in generated tokens) of the first token that
  differs; overall ``mean_first_divergence`` over the prompts that diverged (None when none
  did) and ``diverged``, their count.
- **top-1 agreement**: teacher-forced. Both deployments score the *baseline's* answer token
  by token (vLLM ``prompt_logprobs``), so every position has the same context on both sides;
  the share of positions where both put the same token first. Pooled over all positions.
- **KL divergence** KL(baseline || candidate) of the next-token distributions at those same
  positions, in nats; overall ``mean_kl`` (pooled over positions) and ``max_kl``.

**The tail outside the top k.** The server returns only the top-k logprobs (plus the actual
token). The distributions are compared over the baseline's returned tokens plus one "rest"
bucket holding all remaining probability (1 minus the returned mass). A baseline token the
candidate did not return gets an equal share of the candidate's unreturned mass with the
candidate's rest bucket. Both sides then sum to 1 over the same buckets, so the figure is a
true KL divergence of the coarsened distributions: never negative, exactly 0 for identical
logprobs, and (merging outcomes never increases KL) it underestimates the full-vocabulary
KL; it is exact when the top k hold essentially all the mass, as on a confident model.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from statistics import mean

from model_optimizer.quality.client import Generation, Scored, TokenDist

EPS = 1e-12


def kl_topk(p: TokenDist, q: TokenDist) -> float:
    """KL(p || q) in nats of two partial (top-k) logprob maps, tail as described above."""
    if not p:
        return 0.0
    p_known = {t: math.exp(lp) for t, lp in p.items()}
    q_known = {t: math.exp(lp) for t, lp in q.items()}
    p_rest = max(0.0, 1.0 - sum(p_known.values()))
    q_tail = max(0.0, 1.0 - sum(q_known.values()))
    missing = [t for t in p_known if t not in q_known]
    share = q_tail / (len(missing) + 1)
    q_rest = share + sum(v for t, v in q_known.items() if t not in p_known)
    total = 0.0
    for token, p_i in p_known.items():
        if p_i > 0:
            total += p_i * math.log(p_i / max(q_known.get(token, share), EPS))
    if p_rest > EPS:
        total += p_rest * math.log(p_rest / max(q_rest, EPS))
    return max(total, 0.0)


def top1(dist: TokenDist) -> int | None:
    """The most likely token of a logprob map (ties: the lower token id)."""
    if not dist:
        return None
    return min(dist, key=lambda t: (-dist[t], t))


def first_divergence(a: list[int], b: list[int]) -> int | None:
    """Index of the first differing token; None when the sequences are equal."""
    for index, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return index
    return None if len(a) == len(b) else min(len(a), len(b))


@dataclass
class PromptFidelity:
    """The figures of one prompt."""

    id: str
    exact_match: bool
    first_divergence: int | None
    positions: int = 0
    top1_agreement: float | None = None
    mean_kl: float | None = None
    max_kl: float | None = None
    kl_per_position: list[float] = field(default_factory=list)
    top1_matches: int = 0
    note: str | None = None

    def to_dict(self) -> dict:
        """JSON form."""
        return asdict(self)


@dataclass
class FidelitySummary:
    """Overall fidelity figures (the gate reads these)."""

    prompts: int
    exact_match_rate: float
    diverged: int
    mean_first_divergence: float | None
    positions: int
    top1_agreement: float | None
    mean_kl: float | None
    max_kl: float | None
    unscored: int = 0

    def to_dict(self) -> dict:
        """JSON form."""
        return asdict(self)


def compare_prompt(base: Generation, cand: Generation, base_scored: Scored | None,
                   cand_scored: Scored | None) -> PromptFidelity:
    """Fidelity figures of one prompt (``*_scored``: both sides on the baseline's answer)."""
    if not base.ok or not cand.ok:
        return PromptFidelity(base.id, False, 0, note=f"request failed: "
                                                      f"{base.error or cand.error}")
    divergence = first_divergence(base.token_ids, cand.token_ids)
    exact = divergence is None and base.text == cand.text
    out = PromptFidelity(base.id, exact, divergence)
    if (base_scored is None or cand_scored is None or base_scored.error or cand_scored.error
            or len(base_scored.dists) != len(cand_scored.dists) or not base_scored.dists):
        out.note = "not scored: " + str((base_scored and base_scored.error)
                                        or (cand_scored and cand_scored.error)
                                        or "distributions missing")
        return out
    pairs = list(zip(base_scored.dists, cand_scored.dists, strict=True))
    out.kl_per_position = [kl_topk(p, q) for p, q in pairs]
    out.top1_matches = sum(1 for p, q in pairs if top1(p) == top1(q))
    out.positions = len(pairs)
    out.top1_agreement = out.top1_matches / out.positions
    out.mean_kl = mean(out.kl_per_position)
    out.max_kl = max(out.kl_per_position)
    return out


def summarize(prompts: list[PromptFidelity]) -> FidelitySummary:
    """Overall figures: rates over prompts, agreement and KL pooled over positions."""
    diverged = [p.first_divergence for p in prompts if p.first_divergence is not None]
    kls = [kl for p in prompts for kl in p.kl_per_position]
    positions = sum(p.positions for p in prompts)
    return FidelitySummary(
        prompts=len(prompts),
        exact_match_rate=(sum(p.exact_match for p in prompts) / len(prompts)) if prompts else 0.0,
        diverged=len(diverged),
        mean_first_divergence=mean(diverged) if diverged else None,
        positions=positions,
        top1_agreement=(sum(p.top1_matches for p in prompts) / positions) if positions else None,
        mean_kl=mean(kls) if kls else None,
        max_kl=max(kls) if kls else None,
        unscored=sum(1 for p in prompts if p.positions == 0))


def compare(base: list[Generation], cand: list[Generation], base_scored: list[Scored],
            cand_scored: list[Scored]) -> tuple[list[PromptFidelity], FidelitySummary]:
    """Compare two deployments' generations and teacher-forced scores, matched by item id."""
    cand_by_id = {g.id: g for g in cand}
    base_scores = {s.id: s for s in base_scored}
    cand_scores = {s.id: s for s in cand_scored}
    prompts = [compare_prompt(b, cand_by_id[b.id], base_scores.get(b.id),
                              cand_scores.get(b.id)) for b in base if b.id in cand_by_id]
    return prompts, summarize(prompts)
