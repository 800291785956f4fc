"""What a sweep leaves in its archive: summary.json/.csv, plot.png and report.md."""

from __future__ import annotations

import csv
import io
import statistics
from pathlib import Path
from typing import Any

from model_optimizer.archive import RunArchive
from model_optimizer.archive.names import (
    REPORT_FILE,
    SUMMARY_CSV,
    SUMMARY_FILE,
    SWEEP_PLOT,
)
from model_optimizer.archive.report import fmt
from model_optimizer.fsutil import save_figure
from model_optimizer.recipe.sweep_rules import SCANNING
from model_optimizer.report import write_report as write_html_report
from model_optimizer.report.fitted import prediction_markdown
from model_optimizer.search.core.scanrules import noise_above
from model_optimizer.search.measure import FIGURE_KEYS, RESOURCE_KEYS
from model_optimizer.search.sweep.decide import (
    PHASE_REMEASURE,
    choice_noise,
    choice_resolved,
    decision_record,
)
from model_optimizer.search.sweep.predict import sweep_fit

CSV_COLUMNS = ("step", "value", "phase", "status", *FIGURE_KEYS, "qps_half_width",
               "goodput_qps_half_width", *RESOURCE_KEYS, "failure", "reason")


def summary_rows(state) -> list[dict[str, Any]]:
    """One row per measured step, with the decision that proposed it and that step's own
    figures (a re-measured value has a row per window; state.json written before per-step
    figures existed falls back to the value's latest figures)."""
    proposed = [d for d in state.decisions if d["value"] is not None]
    per_step = getattr(state, "step_figures", None) or []
    rows = []
    for index, point in enumerate(state.history):
        figures = (per_step[index] if len(per_step) == len(state.history)
                   else state.figures.get(str(point.value), {})) or {}
        reason = proposed[index]["reason"] if index < len(proposed) else ""
        row = {"step": index + 1, "value": point.value, "phase": point.phase,
               "status": point.status, "failure": point.failure_kind, "reason": reason}
        for column in CSV_COLUMNS:
            if column not in row:
                row[column] = figures.get(column)
        if point.metric is not None:
            row[state.objective] = point.metric  # the median over repeats
            row[f"{state.objective}_half_width"] = point.half_width
        rows.append(row)
    return rows


def ceiling_of(state) -> Any:
    """The smallest value that failed or was skipped for memory, if any."""
    bad = [p.value for p in state.history if p.status in ("failed", "skipped")]
    return min(bad) if bad and all(isinstance(v, int | float) for v in bad) else None


def write_outputs(archive: RunArchive, loaded, state, chosen, reason: str,
                  written: Path | None = None) -> None:
    """Write summary.json, summary.csv, plot.png and report.md (each atomically)."""
    rows = summary_rows(state)
    resolved = choice_resolved(state.config, state.history, state.knee, state.ceiling_failed,
                               state.confirmations, state.objective)
    stop = next((d for d in reversed(state.decisions)
                 if d["value"] is None and d["phase"] != PHASE_REMEASURE), None)
    summary = {"sweep_id": archive.id, "param": state.config.param,
               "objective": state.objective, "tie_concurrency": state.tie_concurrency,
               "steps": rows, "stop": stop, "chosen": chosen.to_dict() if chosen else None,
               "chosen_reason": reason, "ceiling": ceiling_of(state),
               "confirmations": state.confirmations,
               "noise": choice_noise(state.history, state.confirmations, state.objective),
               "resolved": resolved,
               "decision": state.knee or decision_record(state.config, state.history,
                                                         state.confirmations, resolved,
                                                         state.objective),
               "ceiling_failed": state.ceiling_failed,
               "plateau_threshold": state.config.plateau_threshold,
               "written": str(written) if written else None,
               "strategy": state.strategy, "strategy_reason": state.strategy_reason,
               "launches": sum(p.launches for p in state.history) + state.server_launches
               + sum(1 for c in state.confirmations if not c.get("skipped"))}
    if state.strategy in SCANNING:  # windows at concurrency levels on one server
        minutes = (loaded.spec.workload.duration_s or 20) / 60
        summary["fit"] = sweep_fit(rows, minutes, metric=state.objective)
    archive.write_json(SUMMARY_FILE, summary)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=CSV_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    archive.write_text(SUMMARY_CSV, buffer.getvalue())
    if rows:
        plot_sweep(archive.file(SWEEP_PLOT), state, rows, chosen)
    archive.write_text(REPORT_FILE, render_report(archive.id, loaded, state, summary, rows))
    write_html_report(archive.path)


def plot_sweep(path: Path, state, rows: list[dict], chosen) -> None:
    """Throughput and latency against the swept value; chosen point and ceiling marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = sorted((r for r in rows if r["status"] == "ok" and r["qps"] is not None),
                key=lambda r: _order(r["value"]))
    fig, left = plt.subplots(figsize=(8, 4.5), dpi=110)
    xs = [_x(r["value"]) for r in ok]
    errors = [r.get("qps_half_width") or 0.0 for r in ok]
    left.errorbar(xs, [r["qps"] for r in ok], yerr=errors, fmt="o", capsize=3,
                  color="tab:blue", label="QPS, each window ± 95% interval")
    medians = _medians_by_value(ok, "qps")
    left.plot([_x(v) for v in medians], list(medians.values()), "-", color="tab:blue",
              alpha=0.5, linewidth=1, label="QPS median per value")
    if state.objective == "goodput_qps":
        left.plot(xs, [r["goodput_qps"] for r in ok], "s--", color="tab:cyan",
                  label="goodput")
    left.set_xlabel(state.config.param)
    left.set_ylabel("requests / s")
    right = left.twinx()
    right.plot(xs, [r["ttft_p99_ms"] for r in ok], "^-", color="tab:orange",
               label="TTFT p99 (ms)")
    right.plot(xs, [r["tpot_p50_ms"] for r in ok], "v-", color="tab:red",
               label="TPOT p50 (ms)")
    right.set_ylabel("latency (ms)")
    ceiling = ceiling_of(state)
    if ceiling is not None:
        left.axvline(_x(ceiling), color="black", linestyle=":", label=f"ceiling {ceiling}")
    if chosen is not None and chosen.value is not None:
        left.axvline(_x(chosen.value), color="tab:green", linewidth=2,
                     label=f"chosen {chosen.value}")
    if xs and all(isinstance(x, int | float) for x in xs) and min(xs) > 0 \
            and max(xs) / min(xs) >= 8:
        left.set_xscale("log", base=2)
    handles = left.get_legend_handles_labels()
    more = right.get_legend_handles_labels()
    left.legend(handles[0] + more[0], handles[1] + more[1], loc="best", fontsize=8)
    left.set_title(f"sweep of {state.config.param}")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def _medians_by_value(rows: list[dict], key: str) -> dict:
    """The median of ``key`` over the rows of each value, in the rows' (value) order: one
    point per value, so re-measured windows do not zigzag the line."""
    grouped: dict = {}
    for row in rows:
        grouped.setdefault(row["value"], []).append(row[key])
    return {value: statistics.median(values) for value, values in grouped.items()}


def _order(value: Any) -> Any:
    return (0, value) if isinstance(value, int | float) else (1, str(value))


def _x(value: Any) -> Any:
    return str(value) if isinstance(value, str | bool) else value


def render_report(sweep_id: str, loaded, state, summary: dict, rows: list[dict]) -> str:
    """report.md of a sweep."""
    lines = [f"# Sweep {sweep_id}", "",
             f"- recipe: **{loaded.name}** revision {loaded.resolved['revision']}",
             f"- swept: `engine.{state.config.param}`; objective: {state.objective} "
             "(median over repeats)",
             f"- strategy: **{state.strategy}** ({state.strategy_reason})",
             f"- launches: {summary['launches']}"]
    if state.strategy in SCANNING:
        lines.append(f"- one server launched at max_num_seqs={state.config.max:g}; each value "
                     "below is a steady-state window at that concurrency on it (its own "
                     "archive under steps/), then one launch at the chosen value confirms it")
    if state.tie_concurrency:
        lines.append("- the recipe leaves `workload.concurrency` unset, so the client "
                     "concurrency was tied to max_num_seqs at every step (enough requests "
                     "in flight to fill the batch)")
    lines += ["", "| step | value | status | QPS (± 95%) | goodput | TTFT p99 ms | TPOT p50 ms | "
              "preemptions | why this value |", "|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        status = r["status"] + (f" ({r['failure']})" if r["failure"] else "")
        lines.append(f"| {r['step']} | {r['value']} | {status} | {_pm(r, 'qps')} | "
                     f"{_pm(r, 'goodput_qps')} | {fmt(r['ttft_p99_ms'])} | "
                     f"{fmt(r['tpot_p50_ms'], 2)} | {fmt(r['preemptions'])} | {r['reason']} |")
    if summary["stop"]:
        rule = summary["stop"].get("stop_rule")
        lines += ["", f"**Search stopped**{f' ({rule})' if rule else ''}: "
                  f"{summary['stop']['reason']}"]
    noise = noise_sentence(summary["noise"], state.config.plateau_threshold)
    lines += ["", f"**Measured noise**: {noise}",
              "", f"**Choice**: {summary['chosen_reason']}"]
    if state.knee is not None:
        knee = state.knee
        lines.append(f"- fitted knee {knee['value']}, band {knee['band'][0]}..{knee['band'][1]}"
                     f", the chosen value at least {knee['share_low']:.0%} of the fitted best "
                     f"in 40 refits over {knee['windows']} windows: **"
                     f"{_knee_words(knee)}**"
                     + ("" if knee["resolved"] or knee.get("misfit") else
                        f" (about {knee['more_windows']} more windows near the knee would "
                        "resolve it; `--strict` writes nothing)"))
    for confirmation in summary["confirmations"]:
        verdict = "passed" if confirmation["ok"] else "REJECTED: " + "; ".join(
            confirmation.get("problems") or [])
        if confirmation.get("shortfall"):
            verdict += f"; **not resolved**: {confirmation['shortfall']}"
        lines.append(f"- sustained run at {confirmation['value']}: {verdict}")
    if summary["written"]:
        lines.append(f"\nWrote the new recipe revision to `{summary['written']}` "
                     "(the previous revision is kept here as `recipe.given.yaml`).")
    lines += prediction_markdown(summary.get("fit"), state.config.param)
    lines += ["", "![throughput and latency](plot.png)", ""]
    return "\n".join(lines)


def _pm(row: dict, key: str) -> str:
    """``54.10 ± 2.30`` from a summary row, the bare value without a half-width."""
    half = row.get(f"{key}_half_width")
    return fmt(row.get(key), 2) if half is None or row.get(key) is None else \
        f"{fmt(row[key], 2)} ± {half:.2f}"


def noise_sentence(noise: dict | None, threshold: float) -> str:
    """The measured run-to-run noise in words. A noise above the plateau threshold no longer
    decides anything by itself: the choice rests on paired interleaved windows
    (``search/sweep/margin.py``), and the **Choice** line says whether they resolved it."""
    if not noise:
        return ("no value was measured twice and no sustained run read the chosen value, so "
                "only the noise inside each window (the ± intervals) is known: **the choice "
                "is not resolved** (raise `sweep.budget`, or `sweep.max_launches` for a "
                "relaunching sweep)")
    text = (f"coefficient of variation {noise['cv']:.1%} between repeated windows "
            f"({noise['windows']} windows of {noise['values']} values, re-measured "
            "interleaved)")
    if noise.get("with_confirmation"):
        text = (f"coefficient of variation {noise['cv']:.1%} between the chosen value's "
                f"{noise['windows'] - 1} search window(s) and its sustained run (no value "
                "was re-measured)")
    if not noise_above(noise, threshold):
        return text
    return (f"{text}. One window cannot tell neighbours {threshold:.0%} apart at this noise, "
            "so the choice rests on pairs of interleaved windows, whose ratio drifts far "
            "less; the **Choice** line below says whether they resolved it")


def _knee_words(knee: dict) -> str:
    """resolved, not resolved at this noise, or contradicted by its own windows."""
    if knee["resolved"]:
        return "resolved"
    return ("not resolved: its own windows contradict it" if knee.get("misfit")
            else "not resolved at this noise")
