"""What a tune leaves in its archive: ``trials.csv``, ``summary.json``, the study (``study.db``,
a SQLite copy when the study lives elsewhere), plots (``history.png``, ``importances.png``,
``pareto.png``) and ``report.md`` naming what mattered most.

Everything covers the whole study, every worker's trials, with the machine that ran each.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
import warnings
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from model_optimizer.archive import RunArchive
from model_optimizer.archive.names import (
    HISTORY_PLOT,
    IMPORTANCES_PLOT,
    PARETO_PLOT,
    REPORT_FILE,
    STUDY_FILE,
    SUMMARY_FILE,
    TRIALS_CSV,
)
from model_optimizer.archive.report import fmt
from model_optimizer.report import write_report as write_html_report
from model_optimizer.search.measure import FIGURE_KEYS, RESOURCE_KEYS
from model_optimizer.search.tune.space import TuneConfig

FIGURE_COLUMNS = (*FIGURE_KEYS, *RESOURCE_KEYS)
TAIL_COLUMNS = ("launch", "windows", "failure", "reason", "machine", "worker", "run_ids",
                "seed", "duplicate_of", "constraints")


# ----- reading trials ------------------------------------------------------------------------
def shown_trials(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """Trials worth a row: all but waiting ones and those asked beyond the budget."""
    return [t for t in trials if t.state != TrialState.WAITING
            and not t.user_attrs.get("beyond_budget")]


def trial_status(trial: FrozenTrial) -> str:
    """ok | failed | pruned | interrupted | error | running (the class is in ``failure``)."""
    attrs = trial.user_attrs
    if trial.state == TrialState.RUNNING:
        return "running"
    if attrs.get("interrupted"):
        return "interrupted"
    if "error" in attrs:
        return "error"
    if trial.state == TrialState.PRUNED:
        return "pruned"
    return attrs.get("status") or trial.state.name.lower()


def trial_row(trial: FrozenTrial, config: TuneConfig) -> dict[str, Any]:
    """One flat row: parameters, status, objective, figures, where it ran."""
    attrs, figures = trial.user_attrs, trial.user_attrs.get("figures") or {}
    row: dict[str, Any] = {"number": trial.number, "state": trial.state.name.lower(),
                           "status": trial_status(trial), "feasible": attrs.get("feasible")}
    row.update({name: trial.params.get(name) for name in config.names})
    row["objective"] = trial.values[0] if trial.values else None
    row.update({column: figures.get(column) for column in FIGURE_COLUMNS})
    row.update({"launch": attrs.get("launch"), "windows": windows_of(trial),
                "scan_level": bool(attrs.get("scan_level")),
                "scan_windows": (attrs.get("scan") or {}).get("windows"),
                "failure": attrs.get("failure_kind"), "reason": attrs.get("reason"),
                "machine": attrs.get("machine"), "worker": attrs.get("worker"),
                "run_ids": " ".join(attrs.get("run_ids") or []), "seed": attrs.get("seed"),
                "duplicate_of": attrs.get("duplicate_of"),
                "constraints": dict(trial.constraints) or None,
                "log_excerpt": attrs.get("log_excerpt") or []})
    return row


def windows_of(trial: FrozenTrial) -> int:
    """Measured windows of one trial's own configuration: one per run, or the window of its
    level on a scan server (the launch's count is in its ``scan`` attribute)."""
    attrs = trial.user_attrs
    return attrs.get("windows", len(attrs.get("run_ids") or []))


def ranked_feasible(trials: list[FrozenTrial], config: TuneConfig) -> list[FrozenTrial]:
    """The feasible COMPLETE trials, best first: the higher objective, then the lower second
    objective, then the earlier trial."""
    feasible = [t for t in trials if t.state == TrialState.COMPLETE
                and t.user_attrs.get("feasible")]

    def key(trial: FrozenTrial) -> tuple:
        second = trial.values[1] if config.second_metric else 0.0
        return (-trial.values[0], second, trial.number)
    return sorted(feasible, key=key)


def best_trial(trials: list[FrozenTrial], config: TuneConfig) -> FrozenTrial | None:
    """The first of :func:`ranked_feasible`; None when no trial is feasible."""
    ranked = ranked_feasible(trials, config)
    return ranked[0] if ranked else None


def pareto_front(rows: list[dict], metric: str) -> list[dict]:
    """Feasible rows not beaten on both throughput (higher) and p99 TTFT (lower)."""
    points = [r for r in rows if r["feasible"] and r.get(metric) is not None
              and r.get("ttft_p99_ms") is not None]

    def dominated(row: dict) -> bool:
        return any(o[metric] >= row[metric] and o["ttft_p99_ms"] <= row["ttft_p99_ms"]
                   and (o[metric] > row[metric] or o["ttft_p99_ms"] < row["ttft_p99_ms"])
                   for o in points)
    return sorted((r for r in points if not dominated(r)), key=lambda r: r["ttft_p99_ms"])


def importances(study: optuna.Study, trials: list[FrozenTrial]) -> tuple[dict | None, str]:
    """optuna's parameter importances for the objective, or (None, why not)."""
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    if len(complete) < 2:
        return None, f"needs at least 2 completed trials, the study has {len(complete)}"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = optuna.importance.get_param_importances(study, target=lambda t: t.values[0])
    except (RuntimeError, ValueError, ZeroDivisionError, IndexError) as exc:
        return None, f"optuna could not compute them: {exc}"
    if not found or any(math.isnan(v) for v in found.values()):
        return None, "the completed trials do not vary the knobs enough to compare them"
    return dict(found), ""


def effect_by_value(rows: list[dict], config: TuneConfig) -> dict[str, dict]:
    """Per knob: the median objective of the completed trials at each value, the spread
    between the best and the worst value, and the failed or pruned trials at each value."""
    out = {}
    for name in config.names:
        by_value: dict[str, list[float]] = {}
        lost: dict[str, int] = {}
        for row in rows:
            value = str(row[name])
            if row["status"] == "ok":
                by_value.setdefault(value, []).append(row["objective"] or 0.0)
            elif row["status"] in ("failed", "pruned") and row["duplicate_of"] is None:
                lost[value] = lost.get(value, 0) + 1
        medians = {v: statistics.median(s) for v, s in by_value.items()}
        spread = max(medians.values()) - min(medians.values()) if len(medians) > 1 else 0.0
        out[name] = {"medians": medians, "spread": spread, "failed_or_pruned": lost}
    return out


# ----- writing -------------------------------------------------------------------------------
def write_trials_csv(archive: RunArchive, config: TuneConfig,
                     trials: list[FrozenTrial]) -> list[dict]:
    """trials.csv, one row per trial of the study (atomically); returns the rows."""
    rows = [trial_row(t, config) for t in shown_trials(trials)]
    columns = ["number", "state", "status", "feasible", *config.names, "objective",
               *FIGURE_COLUMNS, *TAIL_COLUMNS]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    archive.write_text(TRIALS_CSV, buffer.getvalue())
    return rows


def write_outputs(archive: RunArchive, loaded, state, config: TuneConfig, study: optuna.Study,
                  best: FrozenTrial | None, reason: str, written: Path | None) -> None:
    """trials.csv, summary.json, the study copy, the plots and report.md."""
    trials = study.get_trials(deepcopy=False)
    rows = write_trials_csv(archive, config, trials)
    found, why_not = importances(study, trials)
    effects = effect_by_value(rows, config)
    front = pareto_front(rows, config.metric)
    study_copy = None if state.local_study else snapshot_study(archive, study)
    summary = {
        "tune_id": archive.id, "study": state.study_name, "storage": state.storage,
        "study_copy": study_copy, "objective": config.objective, "metric": config.metric,
        "second_objective": config.second_objective, "space": config.to_dict()["params"],
        "n_trials": config.n_trials, "stop": state.stop, "reason": reason,
        "best": best.number if best is not None else None,
        "best_params": dict(best.params) if best is not None else None,
        "written": str(written) if written else None, "importances": found,
        "importances_unavailable": why_not or None, "effects": effects,
        "pareto_front": [r["number"] for r in front], "trials": rows,
        "launches": sum(t.user_attrs.get("launches", 0) for t in trials),
        "windows": sum(windows_of(t) for t in trials), "scan": state.scan,
        "strategy": state.scan_reason, "confirmations": state.confirmations,
        "confirmation": state.confirmation,
        "resolved": not (state.confirmation or {}).get("warnings"),
        "trials_here": state.trials_here, "machine": state.machine,
    }
    archive.write_json(SUMMARY_FILE, summary)
    from model_optimizer.search.tune.plots import plot_history, plot_importances, plot_pareto

    plot_history(archive.file(HISTORY_PLOT), rows, config, best)
    if found:
        plot_importances(archive.file(IMPORTANCES_PLOT), found, config)
    plot_pareto(archive.file(PARETO_PLOT), rows, front, config, best,
                loaded.resolved["slo"].get("ttft_p99_ms"))
    archive.write_text(REPORT_FILE, render_report(archive.id, loaded, config, summary, rows,
                                                  front, best))
    write_html_report(archive.path)


def snapshot_study(archive: RunArchive, study: optuna.Study) -> str | None:
    """Copy a study kept elsewhere (PostgreSQL) into ``study.db``; None when it cannot."""
    from model_optimizer.search.tune.study import sqlite_url

    target, tmp = archive.file(STUDY_FILE), archive.file("study.db.tmp")
    tmp.unlink(missing_ok=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optuna.copy_study(from_study_name=study.study_name, from_storage=study._storage,
                              to_storage=sqlite_url(tmp))
    except Exception as exc:  # noqa: BLE001 - a snapshot is a convenience, never fatal
        tmp.unlink(missing_ok=True)
        return f"not copied: {exc}"
    tmp.replace(target)
    return target.name


# ----- report ------------------------------------------------------------------------------
def _space_text(config: TuneConfig) -> str:
    parts = []
    for spec in config.params:
        if spec.kind == "categorical":
            parts.append(f"`{spec.name}` in {list(spec.choices)}")
        else:
            step = f" step {spec.step}" if spec.step else ""
            parts.append(f"`{spec.name}` {spec.kind} {spec.low}..{spec.high}{step}")
    return ", ".join(parts)


def what_mattered(found: dict | None, why_not: str | None, effects: dict,
                  config: TuneConfig) -> list[str]:
    """The report's paragraph naming the knobs that mattered most."""
    lines = []
    if found:
        ranked = sorted(found.items(), key=lambda kv: -kv[1])
        lines.append(f"**{ranked[0][0]}** mattered most for {config.metric} (optuna parameter "
                     "importance: " + ", ".join(f"{k} {v:.2f}" for k, v in ranked) + ").")
    else:
        lines.append(f"optuna's parameter importances are not available ({why_not}).")
        top, data = max(effects.items(), key=lambda kv: (kv[1]["spread"],
                                                         sum(kv[1]["failed_or_pruned"].values())))
        if data["spread"] > 0:
            lines[-1] += (f" By the spread of the median {config.metric} across its values, "
                          f"**{top}** mattered most ({data['spread']:.3g}).")
        elif data["failed_or_pruned"]:
            lines[-1] += (f" **{top}** decided which configurations could run at all "
                          "(failed or pruned trials by value below).")
    for name, data in effects.items():
        medians = ", ".join(f"{v}: {m:.3g}" for v, m in sorted(data["medians"].items(),
                                                               key=lambda kv: _order(kv[0])))
        lost = ", ".join(f"{v}: {n}" for v, n in sorted(data["failed_or_pruned"].items(),
                                                         key=lambda kv: _order(kv[0])))
        lines.append(f"- `{name}`: median {config.metric} by value {{{medians or '-'}}}"
                     + (f"; failed or pruned trials by value {{{lost}}}" if lost else ""))
    return lines


def _order(text: str) -> tuple:
    try:
        return (0, float(text))
    except ValueError:
        return (1, text)


def render_report(tune_id: str, loaded, config: TuneConfig, summary: dict, rows: list[dict],
                  front: list[dict], best: FrozenTrial | None) -> str:
    """report.md of a tune."""
    slo = {k: v for k, v in loaded.resolved["slo"].items() if v is not None}
    lines = [f"# Tune {tune_id}", "",
             f"- recipe: **{loaded.name}** revision {loaded.resolved['revision']}",
             f"- study: `{summary['study']}` in `{summary['storage']}`",
             f"- searched: {_space_text(config)}",
             f"- objective: maximize {config.metric} (median over {config.repeats} repeat(s))"
             + (f", minimize {config.second_metric} (Pareto front)"
                if config.second_metric else ""),
             "- constraints: " + (", ".join(f"{k} {v}" for k, v in slo.items())
                                  or "none (no SLO set)") + "; a failed launch is infeasible",
             f"- budget: {config.n_trials} trials ({config.sampler} sampler); launches: "
             f"{summary['launches']}; measured windows: {summary['windows']}; this worker "
             f"({summary['machine']}) ran trials "
             f"{summary['trials_here'] or 'none'}",
             f"- strategy: {summary['strategy'] or 'one launch per trial'}",
             f"- stopped: {(summary['stop'] or {}).get('reason', 'interrupted')}", ""]
    lines += _best_lines(best, config, summary)
    lines += ["", "## What mattered most", ""]
    lines += what_mattered(summary["importances"], summary["importances_unavailable"],
                           summary["effects"], config) if rows else ["no trial finished yet"]
    lines += ["", "## Trials", "", _table_header(config)]
    lines += [_table_row(r, config, front) for r in rows]
    lines += _failure_lines(rows)
    lines += ["", "![optimization history](history.png)"]
    if summary["importances"]:
        lines.append("![parameter importances](importances.png)")
    lines += ["![throughput vs p99 TTFT](pareto.png)", ""]
    return "\n".join(lines)


def _best_lines(best: FrozenTrial | None, config: TuneConfig, summary: dict) -> list[str]:
    lines = ["## Best feasible trial", ""]
    if best is None:
        return lines + [f"None. {summary['reason']}"]
    figures, attrs = best.user_attrs.get("figures") or {}, best.user_attrs
    runs = ", ".join(attrs.get("run_ids") or []) or f"copied from #{attrs.get('duplicate_of')}"
    params = ", ".join(f"`{k}={v}`" for k, v in best.params.items())
    lines.append(f"Trial {best.number}: {params}: {fmt(figures.get(config.metric), 2)} "
                 f"{config.metric}, TTFT p99 {fmt(figures.get('ttft_p99_ms'))} ms, TPOT p50 "
                 f"{fmt(figures.get('tpot_p50_ms'), 2)} ms; measured on "
                 f"{attrs.get('machine_measured') or attrs.get('machine')} (runs: {runs}).")
    confirmed = [c for c in summary["confirmations"] if c["number"] == best.number]
    if confirmed:
        own = confirmed[-1]
        lines.append(f"\nConfirmed by a launch of its own at these knobs (run {own['run_id']}"
                     f"): {fmt(own['figures'].get(config.metric), 2)} {config.metric}; the "
                     "revision carries these figures.")
    lines += _confirmation_lines(summary.get("confirmation") or {})
    if summary["written"]:
        lines.append(f"\nWrote the new recipe revision to `{summary['written']}` (the previous "
                     "text is kept here as `recipe.previous.yaml`).")
    else:
        lines.append(f"\nNo revision written by this worker: {summary['reason']}")
    return lines


def _confirmation_lines(verdict: dict) -> list[str]:
    """The confirmation's notes (side by side, rejections) and its not-resolved warnings."""
    lines = [f"\n{note[0].upper()}{note[1:]}." for note in verdict.get("notes") or []]
    return lines + [f"\n**Not resolved**: {warning}." for warning in
                    verdict.get("warnings") or []]


def _table_header(config: TuneConfig) -> str:
    names = " | ".join(config.names)
    aligns = "|".join("---:" for _ in config.names)
    return (f"| # | {names} | status | {config.metric} | TTFT p99 ms | feasible | machine | "
            f"note |\n|---:|{aligns}|---|---:|---:|---|---|---|")


def _table_row(row: dict, config: TuneConfig, front: list[dict]) -> str:
    values = " | ".join(str(row[name]) for name in config.names)
    status = row["status"] + (f" ({row['failure']})" if row["failure"] else "")
    note = []
    if row["seed"]:
        note.append(f"seed: {row['seed']}")
    if row["duplicate_of"] is not None:
        note.append(f"same as #{row['duplicate_of']}, not relaunched")
    if row["scan_level"]:
        note.append(f"level scanned on launch #{row['launch']}")
    elif row["launch"] is not None:
        note.append(f"launch #{row['launch']}: {row['scan_windows']} window(s)")
    if any(f["number"] == row["number"] for f in front):
        note.append("Pareto front")
    feasible = {True: "yes", False: "no"}.get(row["feasible"], "-")
    return (f"| {row['number']} | {values} | {status} | {fmt(row.get(config.metric), 2)} | "
            f"{fmt(row['ttft_p99_ms'])} | {feasible} | {row['machine'] or '-'} | "
            f"{'; '.join(note)} |")


def _failure_lines(rows: list[dict]) -> list[str]:
    bad = [r for r in rows if r["status"] in ("failed", "pruned") and r["duplicate_of"] is None]
    if not bad:
        return []
    lines = ["", "Failed launches and pruned trials (pruned ones cost no launch):"]
    for row in bad:
        lines.append(f"- #{row['number']} {row['status']} ({row['failure']}): {row['reason']}")
        lines += [f"  - log: `{line}`" for line in row["log_excerpt"][:3]]
    return lines
