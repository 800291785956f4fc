"""probe-fit's knee judged on the SLO over every window (``search/sweep/slojudge.py``)."""

from model_optimizer.search.simulate.truth import curves
from model_optimizer.search.sweep.fitscan import knee_of
from model_optimizer.search.sweep.model import Point
from model_optimizer.search.sweep.slojudge import judged_range, slo_readings

CURVE = curves()["slo-edge"]        # throughput rises past the SLO's edge at 24.5
MINUTES = 25 / 60


def window(value, phase, ratio=None, *, status="ok"):
    """One window read at the curve's true throughput, its TTFT over the SLO as given."""
    if status != "ok":
        return Point(value, phase, status, [], failure_kind="oom")
    return Point(value, phase, "ok", [CURVE.throughput(value)], slo_met=ratio <= 1.0,
                 slo_ratios=[ratio])


def truth(value):
    return (value / 24.5) ** 2


def up_and_down(levels):
    """An up pass over ``levels`` read at the truth and a down pass read 5% off it."""
    up = [window(v, "scan-up", truth(v)) for v in levels]
    down = [window(v, "scan-down", truth(v) * (1.05 if i % 2 else 0.95))
            for i, v in enumerate(reversed(levels))]
    return up, down


def test_a_knee_past_the_edge_on_one_lucky_window_is_not_resolved():
    levels = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32]
    up = [window(v, "scan-up", truth(v) if v < 32 else 0.95) for v in levels]  # 32 reads met
    down = [window(v, "scan-down", truth(v) * 1.02) for v in reversed(levels)]
    knee = knee_of(up + down, levels, 0.05, MINUTES, ceiling=32)
    assert knee.value > 24.5 and not knee.resolved and knee.slo is not None
    assert "its SLO is not shown met" in knee.verdict()
    blind = [Point(p.value, p.phase, p.status, p.metric_samples, slo_met=True)
             for p in up + down]              # the same windows without their TTFT readings
    assert knee_of(blind, levels, 0.05, MINUTES, ceiling=32).resolved


def test_one_chance_miss_below_the_edge_is_measured_again_until_the_range_is_settled():
    levels = [1, 2, 3, 4, 6, 8, 12, 16, 20, 22]
    up, down = up_and_down(levels)
    history = up + [window(24, "scan-up", 1.05)] + down     # 24 (truth 0.96) read missed once
    assert judged_range(history, levels, slo_readings(history)) == levels
    knee = knee_of(history, levels, 0.05, MINUTES, ceiling=64)
    assert not knee.resolved and "the level that bounds the range, 24" in knee.verdict()
    assert knee.remeasure[0] == 24                           # the bounding level again
    # 24 read twice more within its bound: it joins the range, and nothing above it was
    # measured, so the gap above is bisected next
    history += [window(24, "narrow", 0.92), window(24, "narrow", 0.94)]
    assert judged_range(history, levels, slo_readings(history))[-1] == 24
    knee = knee_of(history, levels, 0.05, MINUTES, ceiling=64)
    assert not knee.resolved and knee.remeasure == ((24 + 49) // 2,)
    assert "nothing above 24 was measured" in knee.verdict()
    # 25 shown to miss on two windows: the range 25..64 is out, the knee is resolved
    history += [window(25, "narrow", 1.35), window(25, "narrow", 1.3)]
    knee = knee_of(history, levels, 0.05, MINUTES, ceiling=64)
    assert knee.resolved and knee.edge is None and 20 <= knee.value <= 24


def test_a_failure_above_the_range_is_the_memory_ceilings_rule_not_the_slos():
    levels = [1, 2, 3, 4, 6, 8, 12, 16, 20, 22]
    up, down = up_and_down(levels)
    history = up + [window(24, "scan-up", status="failed")] + down
    knee = knee_of(history, levels, 0.05, MINUTES, ceiling=64)
    assert knee.edge is None and knee.remeasure == ()
    assert knee.resolved == knee_of([Point(p.value, p.phase, p.status, p.metric_samples,
                                           slo_met=p.slo_met) for p in history],
                                    levels, 0.05, MINUTES, ceiling=64).resolved
