"""The significance tests of `mopt diff`: Mann-Whitney U (checked against SciPy's figures)
and the block bootstrap over completion gaps."""

import random

import pytest

from model_optimizer.history import stats

# Reference values from scipy.stats.mannwhitneyu(a, b, method="asymptotic") (SciPy 1.17).
A = [10.2, 12.5, 8.1, 12.0, 9.5, 9.5, 13.8, 10.3, 9.9, 11.5, 12.3, 9.9, 11.2, 8.1, 9.3, 9.1,
     7.3, 7.0, 6.7, 9.5, 9.7, 9.4, 10.1, 7.3, 9.8, 10.5, 11.5, 8.3, 9.2, 6.0, 9.0, 5.6, 7.2,
     12.2, 5.6, 11.6, 10.7, 9.4, 10.9, 11.1]
B = [13.1, 10.5, 9.8, 9.8, 9.0, 10.9, 9.4, 13.1, 7.3, 8.8, 9.1, 6.8, 14.8, 6.2, 10.4, 9.9,
     14.3, 7.0, 13.1, 9.5, 10.7, 9.7, 12.3, 8.7, 10.8, 11.7, 14.7, 6.2, 14.1, 12.9, 10.0, 11.6,
     10.1, 14.3, 11.4]


@pytest.mark.parametrize(("a", "b", "u", "p"), [
    (list(range(1, 11)), list(range(5, 16)), 18.0, 0.010016063391463935),
    ([1, 1, 2, 2, 3], [1, 2, 2, 3, 3, 4], 9.0, 0.2946648061242889),
    (A, B, 526.5, 0.06608769708044583),
    ([3] * 10, [3] * 12, 60.0, 1.0),
])
def test_mann_whitney_matches_scipy(a, b, u, p):
    got_u, got_p = stats.mann_whitney_u(a, b)
    assert got_u == u and got_p == pytest.approx(p, rel=1e-9)


def test_same_distribution_is_not_significant():
    rng = random.Random(1)
    a = [rng.gauss(100, 10) for _ in range(60)]
    b = [rng.gauss(100, 10) for _ in range(60)]
    judgement = stats.judge_samples(a, b)
    assert judgement.verdict == "not significant" and not judgement.significant


def test_a_large_shift_is_significant_and_a_tiny_one_only_small():
    rng = random.Random(2)
    a = [rng.gauss(100, 5) for _ in range(400)]
    assert stats.judge_samples(a, [x * 1.5 for x in a]).significant
    tiny = stats.judge_samples(a, [x * 1.03 for x in a])
    assert tiny.verdict == "small" and not tiny.significant and tiny.p_value < 0.01


def test_too_few_samples_are_not_judged():
    assert stats.judge_samples([1.0] * 3, [2.0] * 3).verdict == "not judged"


def closed_loop(count, concurrency, service_s, seed):
    rng = random.Random(seed)
    slots, records = [0.0] * concurrency, []
    for _ in range(count):
        slot = min(range(concurrency), key=slots.__getitem__)
        e2e = service_s * rng.uniform(0.8, 1.2)
        records.append({"sent_at": slots[slot], "e2e_s": e2e, "ok": True, "warmup": False,
                        "output_tokens": 32})
        slots[slot] += e2e
    return records


def rate(records):
    gaps = stats.completion_gaps(records)
    return len(gaps) / sum(g for g, _ in gaps)


def test_completion_gaps_add_up_to_the_window():
    records = closed_loop(30, 4, 0.3, 0)
    gaps = stats.completion_gaps(records, "output_tokens")
    window = max(r["sent_at"] + r["e2e_s"] for r in records) - min(r["sent_at"] for r in records)
    assert sum(g for g, _ in gaps) == pytest.approx(window)
    assert {w for _, w in gaps} == {32.0}


def test_throughput_bootstrap_same_vs_four_times():
    a, b = closed_loop(30, 4, 0.3, 0), closed_loop(30, 4, 0.3, 1)
    same = stats.judge_rate(stats.completion_gaps(a), stats.completion_gaps(b), rate(a),
                            rate(b), (4, 4))
    assert not same.significant and same.interval[0] < 1 < same.interval[1]
    slow = closed_loop(30, 1, 0.3, 2)  # one slot instead of four: a quarter of the rate
    four = stats.judge_rate(stats.completion_gaps(a), stats.completion_gaps(slow), rate(a),
                            rate(slow), (4, 1))
    assert four.significant and four.interval[1] < 0.5


def test_bootstrap_is_deterministic():
    a, b = closed_loop(30, 4, 0.3, 0), closed_loop(30, 4, 0.25, 1)
    args = (stats.completion_gaps(a), stats.completion_gaps(b), rate(a), rate(b), (4, 4))
    assert stats.judge_rate(*args) == stats.judge_rate(*args)


def test_a_change_from_a_zero_median_is_not_small():
    judgement = stats.judge_samples([0.0] * 20, [5.0 + i / 10 for i in range(20)])
    assert judgement.significant


def test_half_drift():
    assert stats.half_drift([1.0] * 10 + [2.0] * 10) == pytest.approx(1.0)
    assert stats.half_drift([1.0, 2.0] * 10) == 0.0
    assert stats.half_drift([1.0, 5.0]) == 0.0  # too few to tell
    steady = [(0.1, 1.0)] * 20
    assert stats.rate_drift(steady) == 0.0
    assert stats.rate_drift([(0.1, 1.0)] * 10 + [(0.2, 1.0)] * 10) == pytest.approx(0.5)


def test_a_change_the_runs_show_within_themselves_is_unstable():
    rng = random.Random(4)
    steady = [rng.gauss(100, 3) for _ in range(40)]
    drifting = [rng.gauss(100, 3) for _ in range(20)] + [rng.gauss(200, 3) for _ in range(20)]
    judgement = stats.judge_samples(steady, drifting)
    assert judgement.verdict == "unstable" and not judgement.significant
    assert "drifted by" in judgement.note


def test_coalesced_fraction():
    records = [{"ok": True, "output_tokens": 32, "ttft_s": 0.1, "e2e_s": 0.1}] * 3 + \
              [{"ok": True, "output_tokens": 32, "ttft_s": 0.1, "e2e_s": 0.4}] * 7 + \
              [{"ok": True, "output_tokens": 1, "ttft_s": 0.1, "e2e_s": 0.1}] * 5
    assert stats.coalesced_fraction(records) == pytest.approx(0.3)
    assert stats.coalesced_fraction([]) == 0.0
