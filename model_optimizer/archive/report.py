"""Short Markdown reports for run folders."""

from __future__ import annotations

from typing import Any

_LATENCY_ROWS = (("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl"), ("E2E", "e2e"))


def fmt(value: Any, digits: int = 1) -> str:
    """A figure for a table: '-' for missing, fixed decimals for floats."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def metrics_table(metrics: dict) -> list[str]:
    """Markdown table of latency percentiles (ms)."""
    lines = ["| metric | mean | p50 | p90 | p99 |", "|---|---:|---:|---:|---:|"]
    for label, key in _LATENCY_ROWS:
        cells = [fmt(metrics.get(f"{key}_{s}_ms")) for s in ("mean", "p50", "p90", "p99")]
        lines.append(f"| {label} (ms) | " + " | ".join(cells) + " |")
    return lines


def render_run_report(run_id: str, recipe: dict, outcome: Any) -> str:
    """The report.md of one run."""
    metrics = outcome.metrics or {}
    workload = getattr(outcome, "workload", None) or recipe["workload"]
    lines = [f"# Run {run_id}", "",
             f"- recipe: **{recipe['name']}** revision {recipe['revision']}",
             f"- status: **{outcome.status}**"]
    if outcome.ready_after_s is not None:
        lines.append(f"- server healthy after {outcome.ready_after_s:.1f} s")
    lines.append(f"- workload: {workload['prompt_tokens']} prompt / {workload['output_tokens']} "
                 f"output tokens, concurrency {workload.get('concurrency')}, rate "
                 f"{workload['request_rate']}, {workload.get('num_requests')} requests "
                 f"(+{workload['warmup_requests']} warm-up)")
    if outcome.failure is not None:
        lines += ["", "## Failure", "", f"**{outcome.failure.kind}**: {outcome.failure.hint}",
                  "", "```", *outcome.failure.evidence, "```"]
    if metrics.get("requests"):
        lines += ["", "## Figures", "",
                  f"- requests: {metrics['completed']} completed, {metrics['failed']} failed "
                  f"in {fmt(metrics.get('window_s'), 2)} s",
                  f"- throughput: {fmt(metrics.get('qps'), 2)} req/s, "
                  f"{fmt(metrics.get('output_tok_s'))} output tok/s, "
                  f"{fmt(metrics.get('total_tok_s'))} total tok/s",
                  f"- goodput: {fmt(metrics.get('goodput_qps'), 2)} req/s meeting every SLO",
                  "", *metrics_table(metrics)]
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
