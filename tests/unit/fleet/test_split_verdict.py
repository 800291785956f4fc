"""`mopt split`'s verdict on recorded figures: a clear gain, no difference, a loss, an SLO won
or lost, a spread too wide to resolve, windows the verdict must not use."""

from __future__ import annotations

import statistics

import pytest

from model_optimizer.fleet.split import (
    FLEET_ARM,
    REPLICAS_ARM,
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


ARMS = (SINGLE_ARM, FLEET_ARM, REPLICAS_ARM)


def test_three_arms_rotate_so_each_takes_each_place():
    order = window_order(4, ARMS)
    by_round = [[arm for number, arm in order if number == r] for r in range(1, 5)]
    assert by_round == [["single", "fleet", "replicas"], ["fleet", "replicas", "single"],
                        ["replicas", "single", "fleet"], ["single", "fleet", "replicas"]]
    for place in range(3):  # over three rounds every arm went first, second and last
        assert {arms[place] for arms in by_round[:3]} == set(ARMS)


REPLICA_JITTER = (1.0, 1.01, 0.99, 1.0)


def three_arms(single: dict, fleet: dict, replicas: dict, n: int = 3) -> list[SplitWindow]:
    """Windows of the three arms in the command's order (class -> (qps, ttft p99, slo))."""
    specs = {SINGLE_ARM: single, FLEET_ARM: fleet, REPLICAS_ARM: replicas}
    out = []
    for number, arm in window_order(n, ARMS):
        drift = DRIFT[(number - 1) % len(DRIFT)]
        jitter = {FLEET_ARM: JITTER, REPLICAS_ARM: REPLICA_JITTER}.get(arm, (1.0,) * 4)[
            (number - 1) % len(JITTER)]
        classes = {name: figures(qps * jitter, ttft / jitter, slo, drift)
                   for name, (qps, ttft, slo) in specs[arm].items()}
        out.append(SplitWindow(number, arm, f"run-{number}-{arm}", "ok",
                               figures(10, 500, True, drift), classes))
    return out


def test_the_replicas_are_compared_with_one_server_and_with_the_fleet():
    single = {"short": (8.0, 1000.0, False), "long": (2.0, 3000.0, True)}
    replicas = {"short": (8.0, 750.0, True), "long": (2.0, 3000.0, True)}
    fleet = {"short": (8.0, 600.0, True), "long": (2.0, 3000.0, True)}
    windows = three_arms(single, fleet, replicas)
    verdict = judge_split(windows)
    # the headline is the fleet against one server, as without the replicas
    two_arms = judge_split([w for w in windows if w.arm != REPLICAS_ARM])
    assert (verdict.verdict, verdict.classes) == (two_arms.verdict, two_arms.classes)
    assert verdict.verdict == SPLIT
    against_single, against_replicas = verdict.comparisons
    assert (against_single.arms, against_replicas.arms) == (
        (REPLICAS_ARM, SINGLE_ARM), (FLEET_ARM, REPLICAS_ARM))
    short = next(c for c in against_single.classes if c.request_class == "short")
    assert short.slo_won and short.base_slo is False and short.arm_slo is True
    ttft = next(c for c in short.changes if c.figure == "ttft_p99_ms")
    expected = statistics.geometric_mean([0.75 / j for j in REPLICA_JITTER[:3]])
    assert ttft.outcome == GAIN and ttft.change + 1 == pytest.approx(expected)
    # the class rule against plain replication: 600 against 750 ms, beyond the jitter
    short = next(c for c in against_replicas.classes if c.request_class == "short")
    ttft = next(c for c in short.changes if c.figure == "ttft_p99_ms")
    expected = statistics.geometric_mean([0.8 * r / f for r, f in zip(REPLICA_JITTER[:3],
                                                                        JITTER[:3], strict=True)])
    assert ttft.outcome == GAIN and ttft.change + 1 == pytest.approx(expected)
    assert ttft.pairs == 3 and ttft.low < ttft.change < ttft.high < 0
    assert not short.slo_won and not short.slo_lost  # both met it
    long_ = next(c for c in against_replicas.classes if c.request_class == "long")
    assert {c.outcome for c in long_.changes} == {SAME}
    assert verdict.words.startswith(two_arms.words + "; the replicas against one server: "
                                    "short's SLO met by the replicas, missed by one server, ")
    assert "; the fleet against the replicas (no class rule): short's TTFT p50 -20% [" in (
        verdict.words)
    data = verdict.to_dict()
    assert data["classes"] == two_arms.to_dict()["classes"]
    assert [c["words"] for c in data["comparisons"]] == [c.words() for c in verdict.comparisons]
    assert data["comparisons"][0]["classes"][1]["single_slo_met"] is False
    assert data["comparisons"][0]["classes"][1]["replicas_slo_met"] is True
    report = "\n".join(verdict.markdown())
    assert "## The fleet against the replicas (no class rule), paired by round" in report
    assert f"| short | TTFT p99 | 3 | {ttft.change:+.1%} |" in report


def test_replicas_no_better_than_one_server_and_a_window_left_out():
    same = {"short": (8.0, 1000.0, True)}
    windows = three_arms(same, same, same)
    failed = next(i for i, w in enumerate(windows) if w.arm == REPLICAS_ARM and w.round == 2)
    w = windows[failed]
    windows[failed] = SplitWindow(w.round, w.arm, w.run_id, "ok", w.overall, w.classes, None,
                                  ("replica-2 served no requests: the router did not "
                                   "balance over it",))
    verdict = judge_split(windows)
    against_single, against_replicas = verdict.comparisons
    assert against_single.pairs == against_replicas.pairs == 2  # round 2 left out
    assert against_single.words() == ("the replicas against one server: no class changed "
                                      "beyond +-5%")
    assert verdict.words.endswith("; the fleet against the replicas (no class rule): no "
                                  "class changed beyond +-5%")
    assert judge_split(windows[:1]).comparisons == ()  # no replicas window: no comparison


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
    assert short.base_slo is False and short.arm_slo is True and short.slo_won
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


def test_an_unresolved_comparison_names_the_figure_closest_to_resolving():
    same = {"short": (8.0, 1000.0, True)}
    windows = three_arms(same, same, same)
    for index, w in enumerate(windows):  # the fleet's TTFT swings round to round
        if w.arm == FLEET_ARM:
            swing = (0.7, 1.15, 0.8)[w.round - 1]
            part = w.classes["short"]
            classes = {"short": ArmFigures(part.qps, part.ttft_p50_ms * swing,
                                           part.ttft_p99_ms * swing, part.e2e_p99_ms * swing,
                                           True, 40)}
            windows[index] = SplitWindow(w.round, w.arm, w.run_id, "ok", w.overall, classes)
    against_replicas = judge_split(windows).comparisons[1]
    pending = [ch for c in against_replicas.classes for ch in c.shown(UNRESOLVED)]
    assert pending and all(ch.rounds_needed for ch in pending)
    soonest = min(pending, key=lambda ch: ch.rounds_needed)
    more = max(1, soonest.rounds_needed - 3)
    assert against_replicas.words() == (
        "the fleet against the replicas (no class rule): not resolved after 3 paired rounds "
        f"(the soonest: {soonest.words()}, ~{more} more round{'s' * (more != 1)})")
