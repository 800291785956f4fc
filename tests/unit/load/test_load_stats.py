"""Statistics: percentiles, summaries, goodput and SLO verdicts, from hand-made records."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from model_optimizer.load.client import RequestRecord
from model_optimizer.load.stats import is_good_request, percentile, request_tpot_s, summarize


def make_record(index: int, ttft_s: float, e2e_s: float, output_tokens: int,
                itl_s: list[float] | None = None, prompt_tokens: int = 10,
                ok: bool = True) -> RequestRecord:
    """A completed (or failed) record with the given timings."""
    return RequestRecord(index=index, warmup=False, sent_at=1000.0 + index, ttft_s=ttft_s,
                         e2e_s=e2e_s, itl_s=itl_s or [], output_tokens=output_tokens,
                         prompt_tokens=prompt_tokens, ok=ok, status=200 if ok else 500,
                         error=None if ok else "HTTP 500: boom")


# ----- percentile ---------------------------------------------------------------------------

def test_percentile_hand_computed():
    values = [4.0, 1.0, 3.0, 2.0]  # sorted: 1 2 3 4; position (n-1)q = 3q
    assert percentile(values, 0) == 1.0
    assert percentile(values, 50) == pytest.approx(2.5)
    assert percentile(values, 90) == pytest.approx(3.7)
    assert percentile(values, 99) == pytest.approx(3.97)
    assert percentile(values, 100) == 4.0


def test_percentile_ten_values_and_edges():
    values = list(range(1, 11))  # 1..10
    assert percentile(values, 50) == pytest.approx(5.5)
    assert percentile(values, 90) == pytest.approx(9.1)
    assert percentile(values, 99) == pytest.approx(9.91)
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 50) is None
    with pytest.raises(ValueError):
        percentile([1.0], 101)


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=50),
       st.floats(0, 100))
def test_percentile_matches_numpy_linear(values, q):
    numpy = pytest.importorskip("numpy")
    assert percentile(values, q) == pytest.approx(float(numpy.percentile(values, q)),
                                                  rel=1e-9, abs=1e-6)


# ----- summarize ----------------------------------------------------------------------------

def test_summary_figures_exact():
    records = [
        make_record(0, ttft_s=0.1, e2e_s=0.5, output_tokens=5, itl_s=[0.1, 0.1, 0.1, 0.1]),
        make_record(1, ttft_s=0.3, e2e_s=0.9, output_tokens=4, itl_s=[0.2, 0.2, 0.2]),
        make_record(2, ttft_s=0.0, e2e_s=0.0, output_tokens=0, ok=False),
    ]
    summary = summarize(records, window_s=2.0, slo=None)
    assert summary["requests"] == 3
    assert summary["completed"] == 2
    assert summary["failed"] == 1
    assert summary["success_rate"] == pytest.approx(2 / 3)
    assert summary["error_rate"] == pytest.approx(1 / 3)
    assert summary["qps"] == pytest.approx(1.0)
    assert summary["output_tok_s"] == pytest.approx(9 / 2)
    assert summary["total_tok_s"] == pytest.approx((9 + 20) / 2)
    assert summary["ttft_mean_ms"] == pytest.approx(200.0)
    assert summary["ttft_p50_ms"] == pytest.approx(200.0)
    assert summary["ttft_p90_ms"] == pytest.approx(280.0)
    # TPOT per request: (0.5-0.1)/4 = 0.1 and (0.9-0.3)/3 = 0.2
    assert summary["tpot_mean_ms"] == pytest.approx(150.0)
    assert summary["tpot_p99_ms"] == pytest.approx(199.0)
    # ITL is pooled over chunk gaps: four of 100 ms and three of 200 ms
    assert summary["itl_mean_ms"] == pytest.approx(1000 * 1.0 / 7)
    assert summary["itl_p50_ms"] == pytest.approx(100.0)
    assert summary["e2e_p50_ms"] == pytest.approx(700.0)
    assert summary["slo_met"] is True
    assert summary["slo_violations"] == []
    assert "mismatched_output_tokens" not in summary


def test_tpot_undefined_for_one_token():
    assert request_tpot_s(make_record(0, 0.1, 0.1, output_tokens=1)) is None
    summary = summarize([make_record(0, 0.1, 0.1, output_tokens=1)], window_s=1.0)
    assert summary["tpot_p50_ms"] is None
    assert summary["ttft_p50_ms"] == pytest.approx(100.0)


def test_no_data_gives_none():
    summary = summarize([], window_s=None)
    assert summary["requests"] == 0
    assert summary["success_rate"] is None
    assert summary["qps"] is None
    for metric in ("ttft", "tpot", "itl", "e2e"):
        assert summary[f"{metric}_mean_ms"] is None
        assert summary[f"{metric}_p99_ms"] is None


def test_dict_records_are_accepted():
    records = [make_record(0, 0.1, 0.5, 5, [0.1] * 4), make_record(1, 0.3, 0.9, 4, [0.2] * 3)]
    as_objects = summarize(records, 2.0)
    as_dicts = summarize([record.to_dict() for record in records], 2.0)
    assert as_dicts == as_objects


def test_mismatched_output_tokens_counted():
    records = [make_record(0, 0.1, 0.5, 5), make_record(1, 0.1, 0.5, 4),
               make_record(2, 0.1, 0.5, 3, ok=False)]
    assert summarize(records, 1.0, output_tokens_expected=5)["mismatched_output_tokens"] == 1


# ----- goodput and SLO ----------------------------------------------------------------------

def test_goodput_counts_requests_meeting_every_bound():
    records = [
        make_record(0, ttft_s=0.1, e2e_s=0.5, output_tokens=5),   # tpot 100 ms: good
        make_record(1, ttft_s=0.6, e2e_s=1.0, output_tokens=5),   # ttft 600 > 500
        make_record(2, ttft_s=0.1, e2e_s=1.3, output_tokens=5),   # tpot 300 > 200
        make_record(3, ttft_s=0.1, e2e_s=0.1, output_tokens=1),   # no tpot: good
        make_record(4, ttft_s=0.1, e2e_s=0.5, output_tokens=5, ok=False),
    ]
    slo = {"ttft_p99_ms": 500, "tpot_p50_ms": 200, "itl_p99_ms": 1}
    summary = summarize(records, window_s=4.0, slo=slo)
    assert summary["good_requests"] == 2
    assert summary["goodput_qps"] == pytest.approx(0.5)


def test_goodput_uses_loosest_bound_per_metric():
    record = make_record(0, ttft_s=0.3, e2e_s=0.7, output_tokens=5)
    bounds = {"ttft": 500.0}
    assert is_good_request(record, bounds)
    summary = summarize([record], 1.0, slo={"ttft_p50_ms": 200, "ttft_p99_ms": 500})
    assert summary["good_requests"] == 1
    assert summary["slo_violations"] == ["ttft_p50_ms 300 > 200"]


def test_slo_violations_strings_and_verdict():
    records = [make_record(i, ttft_s=5.1234 if i >= 8 else 1.0, e2e_s=6.0, output_tokens=2)
               for i in range(10)]
    records.append(make_record(10, 1.0, 2.0, 2, ok=False))
    slo = {"ttft_p50_ms": 2000, "ttft_p99_ms": 5000, "min_success_rate": 0.99, "min_qps": 20,
           "tpot_p90_ms": None}
    summary = summarize(records, window_s=1.0, slo=slo)
    assert summary["slo_met"] is False
    assert summary["slo_violations"] == [
        "ttft_p99_ms 5123.4 > 5000",
        "success_rate 0.9091 < 0.99",
        "qps 10 < 20",
    ]


def test_slo_without_data_is_a_violation():
    summary = summarize([], window_s=1.0, slo={"e2e_p90_ms": 100, "min_success_rate": 0.5})
    assert summary["slo_met"] is False
    assert summary["slo_violations"] == ["e2e_p90_ms no data > 100",
                                         "success_rate no data < 0.5"]


def test_slo_met_when_every_bound_holds():
    records = [make_record(i, 0.05, 0.25, 5, [0.05] * 4) for i in range(4)]
    slo = {"ttft_p99_ms": 100, "tpot_p99_ms": 60, "itl_p90_ms": 60, "e2e_p50_ms": 300,
           "min_success_rate": 1.0, "min_qps": 2}
    summary = summarize(records, window_s=1.0, slo=slo)
    assert summary["slo_met"] is True
    assert summary["good_requests"] == 4
    assert summary["goodput_qps"] == pytest.approx(4.0)


def test_unknown_slo_key_rejected():
    with pytest.raises(ValueError, match="unknown SLO key"):
        summarize([], 1.0, slo={"ttft_max_ms": 1})


def test_slo_ratio_is_the_worst_latency_bound_used_and_leaves_out_rates():
    records = [make_record(i, ttft_s=5.1234 if i >= 8 else 1.0, e2e_s=6.0, output_tokens=2)
               for i in range(10)]
    summary = summarize(records, window_s=1.0, slo={
        "ttft_p50_ms": 2000, "ttft_p99_ms": 10000, "min_success_rate": 0.99, "min_qps": 20})
    # p50 1000 ms of 2000 is 0.5; p99 5123.4 of 10000 is 0.512: the worst is the p99's
    assert summary["slo_ratio"] == pytest.approx(summary["ttft_p99_ms"] / 10000)
    assert summary["slo_met"] is False            # qps 10 < 20: a miss the ratio leaves out
    assert summarize(records, 1.0, slo={"min_qps": 1})["slo_ratio"] is None
    assert summarize([], 1.0, slo={"e2e_p90_ms": 100})["slo_ratio"] is None   # no data
