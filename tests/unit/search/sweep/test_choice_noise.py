"""A choice resolved only on a known noise: a search that measured no value twice (a relaunch
sweep whose launch budget ran out before its re-measurement) takes the noise from the chosen
value's window and its sustained run; with neither, the noise is unknown and the choice is
not resolved (the simulator's relaunch was confidently wrong in up to 21% of repetitions at
CV 30% because unknown noise counted as none). A known noise alone does not resolve it: the
margin must still be shown (test_margin.py)."""

from __future__ import annotations

from model_optimizer.search.sweep.decide import choice_noise, choice_resolved, noise_note
from model_optimizer.search.sweep.outputs import noise_sentence
from model_optimizer.search.sweep.strategy import Point, SweepConfig

CONFIG = SweepConfig("max_num_seqs", 1, max=64, plateau_threshold=0.05)
ONCE = [Point(v, "grow", "ok", [q], slo_met=True, half_width=1.0)
        for v, q in ((8, 40.0), (16, 60.0), (32, 70.0), (64, 71.0))]


def sustained(value, qps) -> dict:
    return {"ok": True, "value": value, "figures": {"qps": qps, "qps_half_width": 1.0},
            "shortfall": ""}


def test_unknown_noise_is_not_resolved_and_says_so():
    assert choice_noise(ONCE) is None
    assert not choice_resolved(CONFIG, ONCE, None, None)
    assert "NOT RESOLVED" in noise_note(CONFIG, ONCE) and "unknown" in noise_note(CONFIG, ONCE)
    assert "not resolved" in noise_sentence(None, 0.05)


def test_the_sustained_run_gives_the_noise_of_the_chosen_value():
    close = [sustained(32, 69.0)]                          # 70 then 69: CV about 1%
    noise = choice_noise(ONCE, close)
    assert noise["with_confirmation"] and noise["values"] == 1 and noise["windows"] == 2
    assert 0.005 < noise["cv"] < 0.02
    # a known, small noise, but nothing re-measured: 32's margin over 64 (read once, higher)
    # rests on single windows and is not shown, so the choice is still not resolved
    assert not choice_resolved(CONFIG, ONCE, None, None, close)
    assert "do not show the choice" in noise_note(CONFIG, ONCE, close)
    assert "sustained run" in noise_sentence(noise, 0.05)
    far = [sustained(32, 55.0)]                            # 70 then 55: CV about 17%
    assert not choice_resolved(CONFIG, ONCE, None, None, far)
    assert "its sustained run differ by 17.0%: too few to measure the noise" in \
        noise_note(CONFIG, ONCE, far)


def test_a_rejected_or_unread_sustained_run_gives_no_noise():
    assert choice_noise(ONCE, [{**sustained(32, 69.0), "ok": False}]) is None
    assert choice_noise(ONCE, [{"ok": True, "value": 32, "skipped": True}]) is None
    assert choice_noise(ONCE, [sustained(32, 69.0)], objective="goodput_qps") is None


def test_repeated_values_rule_over_the_sustained_run():
    again = ONCE + [Point(32, "remeasure", "ok", [72.0], slo_met=True, half_width=1.0)]
    noise = choice_noise(again, [sustained(32, 40.0)])
    assert "with_confirmation" not in noise and noise["windows"] == 2
