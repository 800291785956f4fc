"""Parsing vLLM's /metrics page and scraping it over HTTP."""

from __future__ import annotations

import pytest

from model_optimizer.telemetry.prometheus import SERIES_NAMES, parse_metrics, scrape

ALL_NONE = dict.fromkeys(SERIES_NAMES)


def test_parse_fixture_under_load(sample_metrics_text: str) -> None:
    assert parse_metrics(sample_metrics_text) == {
        "kv_cache_usage_perc": 0.1875,
        "num_preemptions_total": 3.0,
        "num_requests_running": 4.0,
        "num_requests_waiting": 2.0,
        "generation_tokens_total": 32.0,
    }


def test_parse_real_idle_scrape(idle_metrics_text: str) -> None:
    assert parse_metrics(idle_metrics_text) == {
        "kv_cache_usage_perc": 0.0,
        "num_preemptions_total": 0.0,
        "num_requests_running": 0.0,
        "num_requests_waiting": 0.0,
        "generation_tokens_total": 0.0,
    }


def test_counts_sum_across_label_sets_and_kv_takes_the_fullest_engine() -> None:
    text = "\n".join(
        [
            'vllm:num_requests_running{engine="0",model_name="a"} 3.0',
            'vllm:num_requests_running{engine="1",model_name="a"} 5.0',
            'vllm:num_requests_waiting{engine="0",model_name="a"} 1',
            'vllm:num_requests_waiting{engine="0",model_name="b"} 2',
            'vllm:num_preemptions_total{engine="0",model_name="a"} 10',
            'vllm:num_preemptions_total{engine="1",model_name="a"} 4',
            'vllm:kv_cache_usage_perc{engine="0",model_name="a"} 0.25',
            'vllm:kv_cache_usage_perc{engine="1",model_name="a"} 0.75',
            'vllm:generation_tokens_total{engine="0",model_name="a"} 100',
            'vllm:generation_tokens_total{engine="1",model_name="a"} 50',
        ]
    )
    assert parse_metrics(text) == {
        "kv_cache_usage_perc": 0.75,
        "num_preemptions_total": 14.0,
        "num_requests_running": 8.0,
        "num_requests_waiting": 3.0,
        "generation_tokens_total": 150.0,
    }


def test_older_names_are_accepted() -> None:
    text = 'vllm:gpu_cache_usage_perc{model_name="m"} 0.5\nvllm:num_preemptions{model_name="m"} 7\n'
    parsed = parse_metrics(text)
    assert parsed["kv_cache_usage_perc"] == 0.5
    assert parsed["num_preemptions_total"] == 7.0


def test_current_name_wins_over_older_name_without_double_counting() -> None:
    text = (
        'vllm:gpu_cache_usage_perc{engine="0"} 0.9\n'
        'vllm:kv_cache_usage_perc{engine="0"} 0.4\n'
        'vllm:num_preemptions_total{engine="0"} 2\n'
        'vllm:num_preemptions{engine="0"} 2\n'
    )
    parsed = parse_metrics(text)
    assert parsed["kv_cache_usage_perc"] == 0.4
    assert parsed["num_preemptions_total"] == 2.0


def test_comments_histograms_unknown_and_junk_lines_are_skipped() -> None:
    text = "\n".join(
        [
            "# HELP vllm:num_requests_running Number of requests in model execution batches.",
            "# TYPE vllm:num_requests_running gauge",
            "# vllm:num_requests_running 99",
            "garbage without a value",
            "{}{}{} 5",
            'vllm:num_requests_running{engine="0" 7',
            'vllm:num_requests_running{engine="0"} not-a-number',
            'vllm:num_requests_running{engine="1"} NaN',
            'vllm:num_requests_running{engine="2"} +Inf',
            'vllm:num_requests_running_bucket{engine="0",le="+Inf"} 50',
            'vllm:num_requests_running_sum{engine="0"} 50',
            'vllm:num_requests_running_created{engine="0"} 1.7e9',
            'vllm:something_new{engine="0"} 12',
            "   ",
            '  vllm:num_requests_running{engine="3"} 2  ',
            "\x00\xff binary junk",
        ]
    )
    assert parse_metrics(text)["num_requests_running"] == 2.0


def test_label_values_with_braces_quotes_and_a_timestamp() -> None:
    text = (
        'vllm:num_requests_waiting{model_name="we}ird \\"name\\"",engine="0"} 4 1700000000000\n'
        "vllm:num_requests_waiting 1e0\n"
    )
    assert parse_metrics(text)["num_requests_waiting"] == 5.0


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "process_open_fds 6.0\n"])
def test_missing_series_are_none(text: str) -> None:
    assert parse_metrics(text) == ALL_NONE


def test_partially_present_series() -> None:
    parsed = parse_metrics('vllm:num_requests_waiting{engine="0"} 0.0\n')
    assert parsed == {**ALL_NONE, "num_requests_waiting": 0.0}


def test_scrape_parses_the_served_page(metrics_server, sample_metrics_text: str) -> None:
    metrics_server.state.body = lambda: sample_metrics_text
    parsed = scrape(metrics_server.url, timeout_s=2.0)
    assert parsed == parse_metrics(sample_metrics_text)
    assert metrics_server.state.requests == 1


def test_scrape_returns_none_on_http_500(metrics_server) -> None:
    metrics_server.state.status = 500
    assert scrape(metrics_server.url, timeout_s=2.0) is None


def test_scrape_returns_none_on_a_closed_port(closed_port_url: str) -> None:
    assert scrape(closed_port_url, timeout_s=1.0) is None


def test_scrape_returns_none_on_timeout(metrics_server) -> None:
    metrics_server.state.delay_s = 1.0
    assert scrape(metrics_server.url, timeout_s=0.1) is None


@pytest.mark.parametrize("url", ["not a url", "http://", "ftp://127.0.0.1/metrics"])
def test_scrape_returns_none_on_a_bad_url(url: str) -> None:
    assert scrape(url, timeout_s=0.5) is None
