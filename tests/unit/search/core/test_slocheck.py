"""The SLO judged over every window: the bound on a value's worst latency over its bound."""

import math
import random

import pytest
from scipy.stats import t as student_t

from model_optimizer.search.core.slocheck import SloCheck, slo_check


def readings(level_ratios: dict[int, list[float]]) -> list[tuple[float, float]]:
    return [(float(level), ratio) for level, ratios in level_ratios.items() for ratio in ratios]


def test_no_reading_is_no_check_and_an_unknown_noise_shows_nothing():
    assert slo_check(8, []) is None
    once = slo_check(8, readings({8: [0.01], 16: [0.02]}))   # no level measured twice
    assert once.estimate == pytest.approx(0.01) and once.bound is None
    assert not once.shown and not once.missed and "noise is unknown" in once.words()
    above = slo_check(32, readings({8: [0.1, 0.1]}))          # nothing measured at or above
    assert above.estimate is None and not above.shown


def test_a_measured_value_is_judged_on_its_own_windows():
    near = slo_check(24, readings({24: [0.9, 1.1, 0.95, 1.05], 16: [0.4, 0.45]}))
    assert near.levels == (24,) and near.windows == 4
    assert near.estimate == pytest.approx(math.exp(sum(map(math.log, [0.9, 1.1, 0.95, 1.05])) / 4))
    assert near.low < 1 < near.bound and not near.shown and not near.missed
    assert near.more_windows() == 0 and near.more_windows(toward_miss=True) == 0
    far = slo_check(16, readings({24: [0.9, 1.1], 16: [0.4, 0.45]}))
    pairs = [(0.9, 1.1), (0.4, 0.45)]
    variance = sum((math.log(a) - math.log(b)) ** 2 / 2 for a, b in pairs) / 2   # df 2
    expected = math.log(0.4) / 2 + math.log(0.45) / 2 + variance / 2 + \
        student_t.ppf(0.975, 2) * math.sqrt(variance / 2)
    assert far.bound == pytest.approx(math.exp(expected))
    assert far.shown and "is shown met" in far.words()


def test_between_levels_the_chord_in_log_log_bounds_a_convex_latency():
    # TTFT p99 / SLO = (N / 24.5) ** 2 read exactly: the chord between 16 and 24 is exact
    truth = {n: (n / 24.5) ** 2 for n in (16, 24)}
    check = slo_check(20, readings({n: [r, r] for n, r in truth.items()}))
    assert check.levels == (16, 24) and check.windows == 4
    assert check.estimate == pytest.approx((20 / 24.5) ** 2)
    # a convex one (a queue past 20): the chord lies above the curve, never below
    convex = {16: 0.3, 24: 1.2}
    chord = slo_check(20, readings({n: [r, r] for n, r in convex.items()}))
    assert chord.estimate > 0.3 * (1.2 / 0.3) ** 0.5 * 0.99   # above the geometric midpoint
    assert chord.estimate == pytest.approx(math.exp(
        math.log(0.3) + math.log(20 / 16) / math.log(24 / 16) * math.log(1.2 / 0.3)))


def test_the_bound_is_calibrated_on_lognormal_readings():
    # a value whose mean reading is exactly the bound: shown met in about 2.5%, not more
    rng, shown, missed = random.Random(5), 0, 0
    sigma = math.sqrt(math.log(1 + 0.3 ** 2))
    for _ in range(2000):
        draw = {n: [math.exp(rng.gauss(-sigma * sigma / 2, sigma)) * (n / 24) ** 2
                    for _ in range(3)] for n in (12, 16, 24)}
        check = slo_check(24, readings(draw))
        shown += check.shown
        missed += check.missed
    assert 0.01 <= shown / 2000 <= 0.04 and 0.01 <= missed / 2000 <= 0.04


def test_more_windows_scale_with_the_square_root_and_the_words_say_so():
    check = SloCheck(20, 0.8, math.log(0.8), 0.4, (16, 24), 4)
    assert not check.shown and check.bound == pytest.approx(0.8 * math.exp(0.4))
    more = check.more_windows()
    assert more == math.ceil(4 * ((0.4 / -math.log(0.8)) ** 2 - 1))
    assert f"about {more} more windows" in check.words()
    assert check.more_windows(toward_miss=True) == 0      # it reads met: never shown missed
    edge = SloCheck(24, 1.2, math.log(1.2), 0.3, (24,), 2)
    assert edge.more_windows(toward_miss=True) > 0 and "range up to 31" in edge.edge_words(32)
    assert SloCheck.from_dict({**vars(edge), "levels": [24]}) == edge
