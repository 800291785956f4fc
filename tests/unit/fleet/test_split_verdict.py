"""`mopt split`'s verdict on recorded figures: a clear gain, no difference, a loss, an SLO won
or lost, a spread too wide to resolve, windows the verdict must not use."""

from __future__ import annotations

import statistics

import pytest

from model_optimizer.fleet.split import (
    FLEET_ARM,
    SINGLE_ARM,
    ArmFigures,
    SplitWindow,
    window_order,
)
from model_optimizer.usecase.split_verdict import (
    GAIN,
    LOSS,
    NO_SPLIT,
    SAME,
    SPLIT,
    UNRESOLVED,
    judge_split,
)

#: the machine's drift per round: it hits both arms of a round alike (20-60% here)
DRIFT = (1.0, 1.45, 0.8, 1.2)
#: small differences between the two windows of one round, beyond the drift
JITTER = (1.0, 1.02, 0.98, 1.01)


def figures(qps: float, ttft: float, slo: bool | None = True, drift: float = 1.0) -> ArmFigures:
    """A class's window: latencies scale with the drift, throughput against it."""
    return ArmFigures(qps / drift, ttft * 0.5 * drift, ttft * drift, ttft * 3 * drift, slo, 40)


def rounds(single: dict, fleet: dict, n: int = 3, fleet_jitter=JITTER) -> list[SplitWindow]:
    """Windows in the command's order; ``single``/``fleet``: class -> (qps, ttft p99, slo)
    or, per round, a list of such."""
    def part(spec, number, drift, jitter):
        qps, ttft, slo = spec[number - 1] if isinstance(spec, list) else spec
        return figures(qps * jitter, ttft / jitter, slo, drift)

    out = []
    for number, arm in window_order(n):
        drift = DRIFT[(number - 1) % len(DRIFT)]
        jitter = fleet_jitter[(number - 1) % len(fleet_jitter)] if arm == FLEET_ARM else 1.0
        spec = fleet if arm == FLEET_ARM else single
        classes = {name: part(value, number, drift, jitter) for name, value in spec.items()}
        out.append(SplitWindow(number, arm, f"run-{number}-{arm}", "ok",
                               figures(10, 500, True, drift), classes))
    return out


def change(verdict, name: str, figure: str):
    item = next(c for c in verdict.classes if c.request_class == name)
    return next(c for c in item.changes if c.figure == figure)


def test_the_arms_alternate_from_round_to_round():
    assert window_order(3) == [(1, SINGLE_ARM), (1, FLEET_ARM), (2, FLEET_ARM),
                               (2, SINGLE_ARM), (3, SINGLE_ARM), (3, FLEET_ARM)]


def test_a_clear_gain_for_one_class_splits_for_that_class():
    single = {"short": (8.0, 1000.0, True), "long": (2.0, 3000.0, True)}
    fleet = {"short": (8.0, 600.0, True), "long": (2.0, 3000.0, True)}
    verdict = judge_split(rounds(single, fleet))  # the drift moves both arms by up to 45%
    ttft = change(verdict, "short", "ttft_p99_ms")
    assert ttft.outcome == GAIN and ttft.pairs == 3
    # the geometric mean of the rounds' ratios, whatever the drift did to both arms
    expected = statistics.geometric_mean([0.6 / j for j in JITTER[:3]])
    assert ttft.change + 1 == pytest.approx(expected)
    assert ttft.low < ttft.change < ttft.high < 0
    assert change(verdict, "short", "e2e_p99_ms").outcome == GAIN
    assert change(verdict, "short", "qps").outcome == SAME  # +-2% between the arms
    assert change(verdict, "long", "qps").outcome == SAME
    assert verdict.verdict == SPLIT
    assert verdict.words.startswith("split: short's TTFT p50 -40% [")
    assert "short's TTFT p99 -40% [" in verdict.words and "long" not in verdict.words
    assert verdict.words.endswith("; worth it for short")


def test_no_difference_beyond_the_margin_means_one_server():
    same = {"short": (8.0, 1000.0, True), "long": (2.0, 3000.0, True)}
    verdict = judge_split(rounds(same, same))
    assert {c.outcome for item in verdict.classes for c in item.changes} == {SAME}
    assert verdict.verdict == NO_SPLIT
    assert "no class changed beyond +-5%" in verdict.words


def test_a_loss_and_no_gain_means_do_not_split():
    single = {"short": (8.0, 1000.0, True), "long": (2.0, 3000.0, True)}
    fleet = {"short": (5.6, 1500.0, True), "long": (1.4, 4500.0, True)}
    verdict = judge_split(rounds(single, fleet))
    qps = change(verdict, "long", "qps")
    assert qps.outcome == LOSS and qps.change == pytest.approx(-0.3, abs=0.02)
    assert change(verdict, "short", "ttft_p99_ms").outcome == LOSS
    assert verdict.verdict == NO_SPLIT
    assert verdict.words.startswith("do not split: ") and "no class gained" in verdict.words


def test_an_slo_the_fleet_loses_vetoes_a_gain():
    single = {"short": (8.0, 1000.0, True), "long": (2.0, 3000.0, True)}
    fleet = {"short": (8.0, 500.0, True), "long": (2.0, 3000.0, False)}
    verdict = judge_split(rounds(single, fleet))
    assert change(verdict, "short", "ttft_p99_ms").outcome == GAIN
    long_ = next(c for c in verdict.classes if c.request_class == "long")
    assert long_.slo_lost and not long_.slo_won
    assert verdict.verdict == NO_SPLIT
    assert verdict.words.startswith("do not split: long's SLO met by one server, missed by "
                                    "the fleet; the fleet's gains do not make up for it: "
                                    "short's TTFT p50 -50% [")


def test_an_slo_one_server_misses_and_the_fleet_meets_counts_for_the_split():
    single = {"short": [(8.0, 1000.0, False), (8.0, 1000.0, True), (8.0, 1000.0, True)],
              "long": (2.0, 3000.0, True)}
    fleet = {"short": (8.0, 1000.0, True), "long": (2.0, 3000.0, True)}
    verdict = judge_split(rounds(single, fleet))
    short = next(c for c in verdict.classes if c.request_class == "short")
    assert short.single_slo is False and short.fleet_slo is True and short.slo_won
    assert not short.shown(GAIN)  # no figure moved: the SLO alone decides
    assert verdict.verdict == SPLIT
    assert verdict.words == ("split: short's SLO missed by one server, met by the fleet; "
                             "worth it for short")


def test_a_spread_too_wide_is_not_resolved_and_says_how_many_more_rounds():
    single = {"short": (8.0, 1000.0, True)}
    fleet = {"short": [(8.0, 700.0, True), (8.0, 1150.0, True), (8.0, 800.0, True)]}
    verdict = judge_split(rounds(single, fleet))
    ttft = change(verdict, "short", "ttft_p99_ms")
    assert ttft.outcome == UNRESOLVED and ttft.low < 0 < ttft.high
    assert ttft.rounds_needed is not None and ttft.rounds_needed > 3
    assert verdict.verdict == UNRESOLVED
    assert verdict.more_rounds is not None and verdict.more_rounds >= 1
    assert verdict.words == (f"not resolved after 3 paired rounds (would need "
                             f"~{verdict.more_rounds} more)")
    # the projection holds: the same ratios repeated over that many rounds resolve it
    longer = rounds(single, {"short": [(8.0, t, True) for t in (700.0, 1150.0, 800.0) * 9]},
                    n=3 + verdict.more_rounds + 3)
    assert change(judge_split(longer), "short", "ttft_p99_ms").outcome == GAIN


def test_one_round_or_unusable_windows_give_no_pair():
    same = {"short": (8.0, 1000.0, True)}
    verdict = judge_split(rounds(same, same, n=1))
    assert verdict.verdict == UNRESOLVED and verdict.pairs == 1
    assert verdict.words == "not resolved after 1 paired round (at least 2 are needed)"
    windows = rounds(same, same, n=3)
    failed = windows[2]  # round 2's fleet window
    windows[2] = SplitWindow(failed.round, failed.arm, failed.run_id, "failed:engine_died",
                             failed.overall, failed.classes, "engine_died")
    misrouted = windows[5]  # round 3's fleet window: the router did not do what the rules say
    windows[5] = SplitWindow(misrouted.round, misrouted.arm, misrouted.run_id, "ok",
                             misrouted.overall, misrouted.classes, None,
                             ("short: served 3, the rules sent 5",))
    verdict = judge_split(windows)
    assert verdict.pairs == 1 and verdict.verdict == UNRESOLVED


def test_a_run_without_classes_is_judged_on_the_whole_run():
    windows = [SplitWindow(w.round, w.arm, w.run_id, w.status,
                           figures(10 if w.arm == SINGLE_ARM else 14, 500, True,
                                   DRIFT[w.round - 1]))
               for w in rounds({}, {}, n=3)]
    verdict = judge_split(windows)
    assert [c.request_class for c in verdict.classes] == ["overall"]
    assert verdict.overall is None
    assert change(verdict, "overall", "qps").outcome == GAIN
    assert verdict.verdict == SPLIT and verdict.words.endswith("worth it for overall")
    data = verdict.to_dict()
    assert data["verdict"] == SPLIT and data["classes"][0]["changes"][0]["figure"] == "qps"
