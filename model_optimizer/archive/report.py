"""Short Markdown reports for run folders."""

from __future__ import annotations

import re
from typing import Any

from model_optimizer.shown import printable
from model_optimizer.telemetry.cardwatch import card_line
from model_optimizer.telemetry.prefix_cache import prefix_cache_line

_LATENCY_ROWS = (("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl"), ("E2E", "e2e"))


def fenced(lines: list[str]) -> list[str]:
    """``lines`` in a Markdown code fence longer than any run of backticks in them, so no
    line (a server's error text) can close it early."""
    longest = max((len(run) for line in lines for run in re.findall("`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, *lines, fence]


def fmt(value: Any, digits: int = 1) -> str:
    """A figure for a table: '-' for missing, fixed decimals for floats."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def with_interval(metrics: dict, key: str, digits: int = 1) -> str:
    """``value ± half-width`` (95%) when the run has an interval for ``key``, else the value."""
    value = metrics.get(key)
    half_width = ((metrics.get("intervals") or {}).get(key) or {}).get("half_width")
    if value is None or half_width is None:
        return fmt(value, digits)
    return f"{fmt(float(value), digits)} ± {half_width:,.{digits}f}"


def steady_line(metrics: dict) -> str | None:
    """One sentence on the steady window the figures come from, None without one."""
    steady = metrics.get("steady")
    if not steady:
        return None
    return (f"steady state: {fmt(steady['window_s'], 1)} s after a {fmt(steady['ramp_s'], 1)} s "
            f"ramp, {steady['completed']} completions counted for throughput, "
            f"{steady['latency_requests']} requests for latency ({steady['drain_requests']} "
            f"still running at the close: latency counted, throughput not); ± = 95% interval")


def _server_row(name: str, row: dict) -> str:
    shown = f"{name} {fmt(row.get('client_mean_ms'))} vs {fmt(row.get('server_mean_ms'))} ms"
    if row.get("verdict") == "client saw more":
        return f"{shown} (client saw more: the {row.get('side')})"
    return f"{shown} ({row.get('verdict')})"


def check_lines(metrics: dict) -> list[str]:
    """The window's checks in words (docs/figures.md): a TPOT the client could not time,
    the client's means against vLLM's own, whether the server was fed, the client's lag,
    the machine's load and, on a GPU, the cards' temperature and clock."""
    lines = [metrics["tpot_note"]] if metrics.get("tpot_note") else []
    check = metrics.get("server_check")
    if check:
        rows = "; ".join(_server_row(name.upper(), row)
                         for name, row in check["figures"].items())
        lines.append(f"client vs vLLM's own means: {rows}; the client's resolution "
                     f"{fmt(check.get('resolution_ms'))} ms")
    feed = metrics.get("feed") or {}
    if feed.get("starved_share") is not None:
        share = f"{feed['starved_share']:.0%} of the client's in-flight time"
        lines.append(
            f"CLIENT-BOUND: the engine did not hold the requests for {share} (vLLM's queue "
            "and inference times): the client and the API server set this window's pace, "
            "not the engine" if feed.get("client_bound") else
            f"engine-paced: the engine held the requests but for {share}")
    lag, load = metrics.get("client_lag") or {}, metrics.get("load_average") or {}
    if lag.get("client_lag_p99_ms") is not None or load.get("before") is not None:
        lines.append(f"client lag p50 {fmt(lag.get('client_lag_p50_ms'))} ms, p99 "
                     f"{fmt(lag.get('client_lag_p99_ms'))} ms; load average "
                     f"{fmt(load.get('before'), 2)} -> {fmt(load.get('after'), 2)}")
    if (card := card_line(metrics)) is not None:
        lines.append(card)
    return lines + cache_and_trace_lines(metrics)


def cache_and_trace_lines(metrics: dict) -> list[str]:
    """The prefix-cache hit rate (vLLM's counters; per class from the responses' cached
    tokens) and a replayed trace's rate against the trace's own."""
    lines = []
    if (line := prefix_cache_line(metrics.get("prefix_cache"))) is not None:
        lines.append(line)
    shares = {name: figures.get("cached_prompt_share")
              for name, figures in (metrics.get("classes") or {}).items()}
    if metrics.get("cached_prompt_share") is not None:
        per_class = ", ".join(f"{name} {share:.0%}" for name, share in shares.items()
                              if share is not None)
        lines.append(f"prompt tokens cached per response (usage.prompt_tokens_details): "
                     f"{metrics['cached_prompt_share']:.0%}"
                     + (f"; {per_class}" if per_class else ""))
    trace = metrics.get("trace")
    if trace:
        lines.append(
            f"trace replayed at {trace['speed']:g}x: {trace['replayed_requests']} of "
            f"{trace['trace_requests']} requests, {fmt(trace.get('replayed_rate_qps'), 2)} "
            f"req/s sent against the trace's {fmt(trace.get('trace_rate_qps'), 2)} req/s "
            f"(target {fmt(trace.get('target_rate_qps'), 2)}); sends late by p50 "
            f"{fmt(trace.get('send_late_p50_ms'))} ms, p99 {fmt(trace.get('send_late_p99_ms'))} ms")
    return lines


def metrics_table(metrics: dict) -> list[str]:
    """Markdown table of latency percentiles (ms), ``± half-width`` where measured."""
    lines = ["| metric | mean | p50 | p90 | p99 |", "|---|---:|---:|---:|---:|"]
    for label, key in _LATENCY_ROWS:
        cells = [with_interval(metrics, f"{key}_{s}_ms") for s in ("mean", "p50", "p90", "p99")]
        lines.append(f"| {label} (ms) | " + " | ".join(cells) + " |")
    return lines


CLASS_COLUMNS = ("class", "done/sent", "req/s", "goodput", "TTFT p50", "TTFT p99", "TPOT p50",
                 "E2E p99", "prompt tok", "output tok", "SLOs")


def class_rows(metrics: dict) -> list[list[str]]:
    """One row of text cells per request class (``CLASS_COLUMNS``); empty without classes."""
    rows = []
    for name, figures in (metrics.get("classes") or {}).items():
        verdict = "met" if figures.get("slo_met") else "; ".join(figures.get("slo_violations")
                                                                 or ["not met"])
        capped = figures.get("capped_requests") or 0
        rows.append([name, f"{figures.get('completed')}/{figures.get('requests')}",
                     fmt(figures.get("qps"), 2), fmt(figures.get("goodput_qps"), 2),
                     fmt(figures.get("ttft_p50_ms")), fmt(figures.get("ttft_p99_ms")),
                     fmt(figures.get("tpot_p50_ms"), 2), fmt(figures.get("e2e_p99_ms")),
                     fmt(figures.get("mean_prompt_tokens")),
                     fmt(figures.get("mean_output_tokens")) + (f" ({capped} capped)"
                                                               if capped else ""), verdict])
    return rows


def class_table(metrics: dict) -> list[str]:
    """Markdown table of the per-class figures (times in ms, token counts are means)."""
    rows = class_rows(metrics)
    if not rows:
        return []
    return ["| " + " | ".join(CLASS_COLUMNS) + " |",
            "|---|" + "---:|" * (len(CLASS_COLUMNS) - 2) + "---|",
            *("| " + " | ".join(row) + " |" for row in rows)]


def workload_text(workload: dict) -> str:
    """One line saying what the requests were."""
    if workload.get("trace"):
        speed = str(workload.get("trace_speed") or 1).strip().removesuffix("x")
        shape = f"trace {workload['trace']} at {speed}x"  # "2x" and 2 both read 2x
    elif workload.get("dataset"):
        shape = f"prompts from {workload['dataset']['path']}"
    elif workload.get("mix"):
        shape = "mix of " + ", ".join(workload["mix"])
    else:
        shape = f"{workload['prompt_tokens']} prompt / {workload['output_tokens']} output tokens"
    eos = "" if workload.get("ignore_eos", True) else " (no ignore_eos: output lengths vary)"
    concurrency = workload.get("concurrency")
    return (f"{shape}{eos}, concurrency {'uncapped' if concurrency is None else concurrency}, rate "
            f"{workload['request_rate']}, {_window_words(workload)} "
            f"(+{workload['warmup_requests']} warm-up requests)")


def render_run_report(run_id: str, recipe: dict, outcome: Any) -> str:
    """The report.md of one run."""
    metrics = outcome.metrics or {}
    workload = getattr(outcome, "workload", None) or recipe["workload"]
    lines = [f"# Run {run_id}", "",
             f"- recipe: **{recipe['name']}** revision {recipe['revision']}",
             f"- status: **{outcome.status}**"]
    if outcome.ready_after_s is not None:
        lines.append(f"- server healthy after {outcome.ready_after_s:.1f} s")
    lines.append(f"- workload: {workload_text(workload)}")
    if outcome.failure is not None:
        lines += ["", "## Failure", "", f"**{outcome.failure.kind}**: {outcome.failure.hint}",
                  "", *fenced([printable(line, lines=False)
                               for line in outcome.failure.evidence])]
    if metrics.get("requests"):
        lines += ["", "## Figures", "",
                  f"- requests: {metrics['completed']} completed, {metrics['failed']} failed "
                  f"in {fmt(metrics.get('window_s'), 2)} s",
                  f"- throughput: {with_interval(metrics, 'qps', 2)} req/s, "
                  f"{with_interval(metrics, 'output_tok_s')} output tok/s, "
                  f"{with_interval(metrics, 'total_tok_s')} total tok/s",
                  f"- goodput: {with_interval(metrics, 'goodput_qps', 2)} req/s meeting every "
                  "SLO"]
        steady = steady_line(metrics)
        lines += [f"- {steady}"] if steady else [
            "- whole window (too short for a steady state): no intervals"]
        lines += [f"- {line}" for line in check_lines(metrics)]
        lines += ["", *metrics_table(metrics)]
        if metrics.get("classes"):
            lines += ["", "### Per class", "", *class_table(metrics)]
        violations = metrics.get("slo_violations") or []
        verdict = "met" if metrics.get("slo_met") else "NOT met: " + "; ".join(violations)
        lines += ["", f"SLOs: {verdict}"]
    peaks = outcome.telemetry_peaks or {}
    if peaks:
        lines += ["", "## Telemetry peaks", ""]
        lines += [f"- {key}: {fmt(value, 3)}" for key, value in peaks.items()]
    lines += ["", "Definitions: TTFT = send to first content chunk; TPOT = (E2E - TTFT) / "
              "(output tokens - 1); ITL = gaps between content chunks; output tokens from the "
              "server's usage.", ""]
    return "\n".join(lines)


def _window_words(workload: dict) -> str:
    """``20 s`` / ``120 requests`` / ``120 requests or 20 s``, and the precision target."""
    parts = []
    if workload.get("num_requests") is not None:
        parts.append(f"{workload['num_requests']} requests")
    if workload.get("duration_s") is not None:
        parts.append(f"{workload['duration_s']:g} s")
    words = " or ".join(parts) or "unbounded"
    if workload.get("target_half_width"):
        words += (f" (then until QPS is within ±{workload['target_half_width']:.0%}, at most "
                  f"{workload.get('max_duration_s') or 120:g} s)")
    return words
