"""Fidelity figures from top-k logprobs: KL with the tail bucket, top-1, divergence."""

import math

import pytest

from model_optimizer.quality.client import Generation, Scored
from model_optimizer.quality.fidelity import compare, first_divergence, kl_topk, top1


def lp(probs: dict) -> dict:
    return {t: math.log(p) for t, p in probs.items()}


def test_identical_distributions_have_zero_kl():
    dist = lp({1: 0.7, 2: 0.2, 3: 0.05})
    assert kl_topk(dist, dict(dist)) == 0.0


def test_full_distributions_give_the_exact_kl():
    p, q = {1: 0.5, 2: 0.5}, {1: 0.9, 2: 0.1}
    exact = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)
    assert kl_topk(lp(p), lp(q)) == pytest.approx(exact, rel=1e-12)


def test_the_tail_is_one_bucket_and_a_missing_token_shares_the_candidates_tail():
    p = lp({1: 0.6, 2: 0.3})            # rest 0.1
    q = lp({1: 0.6, 3: 0.2})            # token 2 not returned; unreturned mass 0.2
    share = 0.2 / 2                     # token 2 and the rest bucket share it
    q_rest = share + 0.2                # plus the candidate's token 3, outside p's tokens
    expected = (0.6 * math.log(0.6 / 0.6) + 0.3 * math.log(0.3 / share)
                + 0.1 * math.log(0.1 / q_rest))
    assert kl_topk(p, q) == pytest.approx(expected, rel=1e-12)
    assert kl_topk(p, q) > 0


def test_kl_is_never_negative_on_partial_maps():
    p = lp({5: 0.99})
    q = lp({5: 0.995, 6: 0.004})
    assert kl_topk(p, q) >= 0.0
    assert kl_topk({}, q) == 0.0


def test_top1_and_first_divergence():
    assert top1(lp({4: 0.4, 2: 0.4, 9: 0.2})) == 2     # ties: the lower token id
    assert top1({}) is None
    assert first_divergence([1, 2, 3], [1, 2, 3]) is None
    assert first_divergence([1, 2, 3], [1, 5, 3]) == 1
    assert first_divergence([1, 2], [1, 2, 3]) == 2


def gen(item_id, tokens, text=None):
    return Generation(item_id, 0, text or " ".join(map(str, tokens)), [0, 1], tokens)


def test_compare_pools_positions_and_counts_divergences():
    base = [gen("a", [5, 6, 7]), gen("b", [8, 9])]
    cand = [gen("a", [5, 6, 7]), gen("b", [8, 4])]
    d1, d2 = lp({5: 0.9, 6: 0.1}), lp({6: 0.8, 5: 0.2})
    base_scores = [Scored("a", [d1, d1, d1]), Scored("b", [d1, d1])]
    cand_scores = [Scored("a", [d1, d1, d1]), Scored("b", [d1, d2])]
    prompts, summary = compare(base, cand, base_scores, cand_scores)
    assert [p.exact_match for p in prompts] == [True, False]
    assert prompts[1].first_divergence == 1
    assert summary.exact_match_rate == 0.5 and summary.diverged == 1
    assert summary.mean_first_divergence == 1
    assert summary.positions == 5 and summary.top1_agreement == pytest.approx(4 / 5)
    assert summary.mean_kl == pytest.approx(kl_topk(d1, d2) / 5)
    assert summary.max_kl == pytest.approx(kl_topk(d1, d2))


def test_failed_or_unscored_prompts_are_counted_not_hidden():
    base = [gen("a", [1]), gen("b", [2])]
    cand = [Generation("a", 0, error="HTTP 500: boom"), gen("b", [2])]
    prompts, summary = compare(base, cand, [Scored("b", [{2: 0.0}])],
                               [Scored("b", error="timeout")])
    assert prompts[0].note.startswith("request failed") and not prompts[0].exact_match
    assert prompts[1].exact_match and "not scored" in prompts[1].note
    assert summary.unscored == 2 and summary.top1_agreement is None and summary.mean_kl is None
