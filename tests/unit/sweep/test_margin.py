"""The knee's margin: a choice is resolved only when its re-measured windows show it at
0.90 or more of the best re-measured value at one-sided 95% (Student's t at the noise's
degrees of freedom), and the re-measurement goes on (at most ``remeasure_rounds`` more
rounds) while they do not. The simulator's probe-scan and relaunch were confidently wrong
with choices at 0.88-0.90 of the best whose own selecting window read high."""

from __future__ import annotations

import math

from model_optimizer.sweep.decide import (
    PHASE_REMEASURE,
    choice_resolved,
    margin_shortfall,
    noise_note,
    remeasure_plan,
)
from model_optimizer.sweep.strategy import Point, SweepConfig

CONFIG = SweepConfig("max_num_seqs", 1, max=64, plateau_threshold=0.05)


def window(value, qps, phase="grow") -> Point:
    return Point(value, phase, "ok", [qps], slo_met=True, launches=0, half_width=1.0)


def search(knee_grow: float) -> list[Point]:
    """Growth to 64 and a bisection point 24 whose one window reads ``knee_grow``."""
    return [window(8, 50.0), window(16, 80.0), window(32, 101.0), window(64, 100.0),
            window(24, knee_grow, "bisect")]


def again(*pairs) -> list[Point]:
    return [window(v, q, PHASE_REMEASURE) for v, q in pairs]


def test_a_knee_whose_re_measured_windows_hold_up_is_resolved():
    history = search(97.0) + again((24, 96.0), (32, 100.0), (24, 95.0), (32, 101.0))
    assert margin_shortfall(0.05, history) is None
    written = [{"ok": True, "value": 24, "figures": {"qps": 95.5}}]
    assert choice_resolved(CONFIG, history, None, None, written)
    assert noise_note(CONFIG, history, written) == ""


def test_the_selecting_window_does_not_vouch_for_its_value():
    # 24 read 97 once (so it was bisected to as the knee); re-measured it reads 96 and 92
    # against 100 and 101: its pooled median 96 is within 5% of 101, its re-measured mean
    # 0.935 of the best's, which the noise (2.0%, 4 degrees of freedom) cannot show >= 0.90
    history = search(97.0) + again((24, 96.0), (32, 100.0), (24, 92.0), (32, 101.0))
    short = margin_shortfall(0.05, history)
    assert short is not None and 0 < short < 0.02
    written = [{"ok": True, "value": 24, "figures": {"qps": 94.0}}]
    assert not choice_resolved(CONFIG, history, None, None, written)
    assert "do not show the choice at 90%" in noise_note(CONFIG, history, written)
    with_selecting = [Point(p.value, PHASE_REMEASURE, "ok", p.metric_samples, slo_met=True)
                      if p.value == 24 else p for p in history]
    assert margin_shortfall(0.05, with_selecting) is None   # the 97 would have vouched


def test_fewer_than_two_re_measured_windows_show_no_margin():
    history = search(97.0) + again((24, 96.0), (32, 100.0))
    assert margin_shortfall(0.05, history) == math.inf
    written = [{"ok": True, "value": 24, "figures": {"qps": 96.0}}]
    assert not choice_resolved(CONFIG, history, None, None, written)


def test_the_best_needs_no_margin_and_noise_above_the_threshold_is_judged_elsewhere():
    history = search(97.0) + again((24, 96.0), (32, 100.0), (24, 95.0), (32, 101.0))
    assert margin_shortfall(0.05, history, 32) is None
    noisy = search(97.0) + again((24, 70.0), (32, 100.0), (24, 120.0), (32, 60.0))
    assert margin_shortfall(0.05, noisy, 24) is None
    assert not choice_resolved(CONFIG, noisy, None, None)


def test_zero_noise_takes_every_window():
    exact = [window(v, q) for v, q in ((16, 80.0), (32, 100.0), (24, 96.0))]
    exact += again((24, 96.0))
    assert margin_shortfall(0.05, exact, 24) is None             # 0.96 of 100, exactly


def test_a_margin_not_shown_gets_more_rounds_bounded_by_remeasure_rounds():
    history = search(97.0)
    assert remeasure_plan(0.05, history, 2) == [24, 32, 24, 32]
    history += again((24, 96.0), (32, 100.0), (24, 92.0), (32, 101.0))
    assert margin_shortfall(0.05, history) is not None
    assert remeasure_plan(0.05, history, 2) == [24, 32]           # a round to show it
    assert remeasure_plan(0.05, history, 1) == []                 # 1 round + 1 spent
    assert remeasure_plan(0.05, history + again((24, 93.0)), 2) == [32]
    shown = history + again((24, 93.0), (32, 100.5))
    assert margin_shortfall(0.05, shown) is None                  # 6 degrees of freedom
    assert remeasure_plan(0.05, shown, 2) == []
