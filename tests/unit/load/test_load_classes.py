"""Per-class figures and per-class SLOs; the client carries classes, lengths and the API key."""

from __future__ import annotations

import pytest

from model_optimizer.load.classes import apply_classes, class_slo, run_slo, summarize_classes
from model_optimizer.load.client import RequestRecord, build_payload, run_load_sync
from model_optimizer.load.mock_server import MockServer
from model_optimizer.load.stats import summarize
from model_optimizer.load.workload import WorkItem

SLO = {"ttft_p99_ms": 1000, "e2e_p99_ms": None,
       "classes": {"short": {"ttft_p99_ms": 100, "e2e_p99_ms": None}}}


def record(index, request_class, ttft_s, ok=True, output=4, asked=4):
    return RequestRecord(index=index, warmup=False, sent_at=float(index), ttft_s=ttft_s,
                         e2e_s=ttft_s + 0.03, output_tokens=output, prompt_tokens=10, ok=ok,
                         request_class=request_class, requested_output_tokens=asked)


RECORDS = ([record(i, "short", 0.05) for i in range(8)]
           + [record(8, "short", 0.5), record(9, "short", 0.05, ok=False)]
           + [record(10 + i, "long", 0.8, output=2, asked=8) for i in range(5)])


def test_class_slo_lays_the_class_bounds_over_the_run_bounds():
    assert run_slo(SLO) == {"ttft_p99_ms": 1000, "e2e_p99_ms": None}
    assert class_slo(SLO, "short")["ttft_p99_ms"] == 100
    assert class_slo(SLO, "long")["ttft_p99_ms"] == 1000
    assert class_slo(SLO, None)["ttft_p99_ms"] == 1000


def test_figures_per_class_in_the_same_window():
    classes = summarize_classes(RECORDS, 10.0, SLO)
    short, long_ = classes["short"], classes["long"]
    assert (short["requests"], short["completed"], short["failed"]) == (10, 9, 1)
    assert short["qps"] == pytest.approx(0.9) and long_["qps"] == pytest.approx(0.5)
    assert short["good_requests"] == 8  # the 500 ms one misses short's 100 ms bound
    assert long_["good_requests"] == 5  # 800 ms is within the run's 1000 ms bound
    assert short["ttft_p50_ms"] == pytest.approx(50.0)
    assert long_["capped_requests"] == 5 and short["capped_requests"] == 0
    assert long_["mean_output_tokens"] == 2 and short["mean_prompt_tokens"] == 10
    assert short["slo_met"] is False and long_["slo_met"] is True


def test_run_verdict_and_goodput_fold_in_every_class():
    metrics = summarize(RECORDS, 10.0, run_slo(SLO))
    assert metrics["slo_met"] is True  # the run's own 1000 ms p99 holds
    apply_classes(metrics, RECORDS, 10.0, SLO)
    assert metrics["good_requests"] == 13 and metrics["goodput_qps"] == pytest.approx(1.3)
    assert metrics["slo_met"] is False
    assert any(v.startswith("short: ttft_p99_ms") for v in metrics["slo_violations"])
    assert metrics["capped_requests"] == 5
    assert set(metrics["classes"]) == {"short", "long"}


def test_without_classes_metrics_stay_as_they_were():
    plain = [record(i, None, 0.05) for i in range(4)]
    metrics = summarize(plain, 2.0, {"ttft_p99_ms": 100})
    before = dict(metrics)
    apply_classes(metrics, plain, 2.0, {"ttft_p99_ms": 100})
    assert "classes" not in metrics
    assert {k: v for k, v in metrics.items() if k != "capped_requests"} == before


def test_payload_takes_the_item_length_and_optional_ignore_eos():
    item = WorkItem("hello", 17, "short", 3)
    payload = build_payload("m", {"output_tokens": 5}, item)
    assert payload["prompt"] == "hello" and payload["max_tokens"] == 17
    assert payload["ignore_eos"] is True
    plain = build_payload("m", {"output_tokens": 5, "ignore_eos": False}, "hi")
    assert "ignore_eos" not in plain and plain["max_tokens"] == 5
    chat = build_payload("m", {"output_tokens": 5, "endpoint": "chat"},
                         WorkItem([{"role": "user", "content": "x"}], 9))
    assert chat["max_completion_tokens"] == 9 and chat["messages"][0]["content"] == "x"


def test_records_carry_class_and_asked_length_and_the_key_is_sent(monkeypatch):
    monkeypatch.setenv("MOPT_UNIT_KEY", "k-123")
    items = [WorkItem(f"p {i}", 3 + i % 2, "a" if i % 2 else "b") for i in range(6)]
    workload = {"output_tokens": 1, "concurrency": 2, "num_requests": 6, "warmup_requests": 0,
                "request_timeout_s": 10.0, "api_key_env": "MOPT_UNIT_KEY"}
    with MockServer(api_key="k-123") as server:
        result = run_load_sync(server.url, "mock-model", workload, items)
        refused = run_load_sync(server.url, "mock-model", {**workload, "api_key_env": None},
                                items)
    assert all(r.ok for r in result.records)
    for rec in result.records:
        assert rec.request_class == ("a" if rec.index % 2 else "b")
        assert rec.output_tokens == rec.requested_output_tokens == 3 + rec.index % 2
    assert all(r.status == 401 and not r.ok for r in refused.records)


def test_report_has_a_row_per_class():
    from model_optimizer.archive.report import class_table, workload_text

    metrics = summarize(RECORDS, 10.0, run_slo(SLO))
    apply_classes(metrics, RECORDS, 10.0, SLO)
    table = class_table(metrics)
    assert table[0].startswith("| class | done/sent | req/s |")
    long_row = next(row for row in table if row.startswith("| long |"))
    assert "| 5/5 | 0.50 |" in long_row and "(5 capped)" in long_row and long_row.endswith(
        "| met |")
    short_row = next(row for row in table if row.startswith("| short |"))
    assert "ttft_p99_ms" in short_row
    text = workload_text({"mix": {"short": {}, "long": {}}, "ignore_eos": False,
                          "concurrency": 4, "request_rate": "inf", "num_requests": 10,
                          "warmup_requests": 0})
    assert text.startswith("mix of short, long (no ignore_eos: output lengths vary)")


def test_a_traces_speed_reads_once_whether_given_as_text_or_number():
    from model_optimizer.archive.report import workload_text
    base = {"trace": "t.jsonl", "concurrency": None, "request_rate": "inf", "duration_s": 20,
            "warmup_requests": 0}
    for given, shown in (("1x", "at 1x,"), (2, "at 2x,"), ("0.5x", "at 0.5x,"), (None, "at 1x,")):
        assert shown in workload_text({**base, "trace_speed": given}), given
