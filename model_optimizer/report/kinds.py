"""What the HTML report shows of each kind of archive: a run, a sweep, a tune, an optimize, a
fleet run (its router, per class and per instance).

Every section reads the archive's own files (``metrics.json``, ``summary.json``,
``summary.csv``, the resolved recipe); nothing is recomputed, so the page shows exactly the
archived numbers."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import yaml

from model_optimizer.archive.names import (
    METRICS_FILE,
    RESOLVED_RECIPE,
    RUN_FILE,
    STEPS_DIR,
    SUMMARY_CSV,
    SUMMARY_FILE,
)
from model_optimizer.archive.report import CLASS_COLUMNS, class_rows, fmt, with_interval
from model_optimizer.fleet.finish import INSTANCE_COLUMNS, instance_rows
from model_optimizer.fleet.launch import ROUTER_CONFIG
from model_optimizer.report.fitted import fit_band, fit_section
from model_optimizer.report.page import Page
from model_optimizer.report.svg import Point, curve_chart

_LATENCY = (("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl"), ("E2E", "e2e"))
_THROUGHPUT = (("requests/s", "qps"), ("goodput req/s", "goodput_qps"),
               ("output tokens/s", "output_tok_s"))


def read_json(folder: Path, name: str) -> dict:
    """A JSON file of the archive as a dict ({} when absent or unreadable)."""
    try:
        data = json.loads((folder / name).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _resolved(folder: Path) -> dict:
    try:
        data = yaml.safe_load((folder / RESOLVED_RECIPE).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def engine_section(page: Page, folder: Path) -> None:
    """The engine configuration the run launched (from its resolved recipe)."""
    engine = _resolved(folder).get("engine") or {}
    rows = [[key, json.dumps(value)] for key, value in engine.items()
            if value not in (None, {}, []) and key != "env"]
    if rows:
        page.heading("Engine configuration")
        page.table(["setting", "value"], rows, table_id="engine")


def run_section(page: Page, folder: Path, status: dict) -> None:
    """A run's verdict, throughput and latency figures with their 95% intervals."""
    metrics = read_json(folder, METRICS_FILE)
    state = status.get("status", "?")
    if not metrics:
        page.verdict(f"status {state}: no figures were archived", "bad")
        return
    met = metrics.get("slo_met")
    level = "ok" if state == "ok" and met is not False else ("warn" if state == "ok" else "bad")
    page.verdict(f"status {state}; SLOs {'met' if met else 'not met' if met is False else '-'}",
                 level)
    page.heading("Throughput (steady-state window, ± = 95% interval)")
    page.table(["figure", "value"], [[label, with_interval(metrics, key, 2)]
                                     for label, key in _THROUGHPUT], table_id="throughput")
    page.heading("Latency (ms, ± = 95% interval)")
    rows = [[label, *(with_interval(metrics, f"{key}_{s}_ms") for s in ("mean", "p50", "p90",
                                                                          "p99"))]
            for label, key in _LATENCY]
    page.table(["metric", "mean", "p50", "p90", "p99"], rows, table_id="latency")
    engine_section(page, folder)


def _step_point(row: dict, objective: str) -> Point | None:
    value, metric = row.get("value"), row.get(objective)
    if not isinstance(value, int | float) or not isinstance(metric, int | float):
        return None
    half = row.get(f"{objective}_half_width")
    low, high = ((metric - half, metric + half) if isinstance(half, int | float)
                 else (None, None))
    return Point(float(value), float(metric), low, high,
                 f"step {row.get('step')}: {fmt(value)} -> {fmt(metric, 2)}"
                 + (f" ± {half:.2f}" if isinstance(half, int | float) else "")
                 + f" ({row.get('phase')})")


def _sweep_verdict(page: Page, summary: dict) -> None:
    chosen = (summary.get("chosen") or {}).get("value")
    reason = summary.get("chosen_reason") or ""
    noise = summary.get("noise") or {}
    head = f"{summary.get('param')}={chosen}"
    text = reason if reason.startswith(head) else f"{head}: {reason}"
    if chosen is None:
        page.verdict(f"nothing chosen: {reason}", "bad")
    elif summary.get("resolved") is False:
        page.verdict(f"NOT RESOLVED at this noise: {text}", "warn")
    elif _noisy(noise, summary.get("plateau_threshold")):
        page.verdict(f"{text} (measured noise above the plateau threshold: the windows do "
                     "not resolve this choice)", "warn")
    else:
        page.verdict(text, "ok")


def _noisy(noise: dict, threshold: float | None) -> bool:
    """True when the measured noise between repeated windows exceeds the plateau threshold."""
    cv = noise.get("cv")
    return isinstance(cv, int | float) and isinstance(threshold, int | float) and cv > threshold


def sweep_section(page: Page, folder: Path, status: dict) -> None:
    """A sweep's verdict, its curve (every window with its interval, the choice marked) and
    its steps."""
    summary = read_json(folder, SUMMARY_FILE)
    if not summary:
        page.verdict(f"status {status.get('status', '?')}: no summary archived", "bad")
        return
    _sweep_verdict(page, summary)
    objective = summary.get("objective") or "qps"
    rows = summary.get("steps") or []
    points = [p for p in (_step_point(r, objective) for r in rows) if p is not None]
    chosen = (summary.get("chosen") or {}).get("value")
    fit = summary.get("fit")
    band = fit_band(fit, objective)
    page.heading(f"{objective} against {summary.get('param')}")
    page.raw(curve_chart(points, x_label=str(summary.get("param")), y_label=objective,
                         chosen=chosen if isinstance(chosen, int | float) else None,
                         band=band))
    page.paragraph(f"strategy {summary.get('strategy')}; {summary.get('launches')} launches; "
                   "each point is one window with its 95% interval, drawn by value, not in "
                   "the order measured" + ("; the dashed line is the fitted curve (drift "
                                           "removed), the shade its band" if band else ""),
                   "muted")
    fit_section(page, fit, rows, str(summary.get("param")))
    page.heading("Steps")
    page.table(["step", "value", "phase", "status", objective, "TTFT p99 ms", "reason"],
               [[str(r.get("step")), fmt(r.get("value")), str(r.get("phase")),
                 str(r.get("status")), _with_half(r, objective), fmt(r.get("ttft_p99_ms")),
                 str(r.get("reason") or "")] for r in rows], table_id="steps")
    _step_links(page, folder)


def _with_half(row: dict, key: str) -> str:
    value, half = row.get(key), row.get(f"{key}_half_width")
    if isinstance(value, int | float) and isinstance(half, int | float):
        return f"{value:,.2f} ± {half:,.2f}"
    return fmt(value, 2)


def _step_links(page: Page, folder: Path) -> None:
    steps = sorted(p for p in (folder / STEPS_DIR).glob("*") if p.is_dir())
    if steps:
        page.heading("Archives of the steps")
        page.link_table(["archive", "status"], [
            (f"{STEPS_DIR}/{p.name}/report.md", [p.name, read_json(p, "status.json")
                                                 .get("status", "?")]) for p in steps])


def tune_section(page: Page, folder: Path, status: dict) -> None:
    """A tune's best trial and every trial with its parameters and objective."""
    summary = read_json(folder, SUMMARY_FILE)
    trials = summary.get("trials") or []
    best = summary.get("best")
    if best is None:
        page.verdict(f"no feasible trial: {summary.get('reason') or status.get('status')}",
                     "bad")
    else:
        page.verdict(f"best trial {best}: {json.dumps(summary.get('best_params'))}", "ok")
    metric = summary.get("metric") or "qps"
    points = [Point(float(t["number"]), float(t[metric])) for t in trials
              if isinstance(t.get(metric), int | float) and isinstance(t.get("number"), int)]
    page.heading(f"{metric} by trial")
    page.raw(curve_chart(points, x_label="trial", y_label=metric))
    page.heading("Trials")
    params = sorted({k for t in trials for k in (t.get("params") or {})})
    page.table(["trial", *params, metric, "state"],
               [[str(t.get("number")), *(fmt((t.get("params") or {}).get(p)) for p in params),
                 fmt(t.get(metric), 2), str(t.get("state", ""))] for t in trials],
               table_id="trials")
    page.paragraph(f"{summary.get('launches')} launches, {summary.get('windows')} windows",
                   "muted")


def optimize_section(page: Page, folder: Path, status: dict) -> None:
    """The optimize pipeline's before/after table, one row per stage."""
    try:
        rows = list(csv.DictReader(io.StringIO((folder / SUMMARY_CSV).read_text())))
    except OSError:
        rows = []
    survivor = next((r["stage"] for r in rows if r.get("survivor") == "True"), None)
    page.verdict(f"survivor: {survivor or 'none'} (status {status.get('status', '?')})",
                 "ok" if survivor else "bad")
    if rows:
        columns = [c for c in rows[0] if c not in ("survivor",)]
        page.heading("Before and after")
        page.table(columns, [[r.get(c) or "-" for c in columns] for r in rows],
                   table_id="stages")
    _step_links(page, folder)


def _fleet_router(page: Page, folder: Path, run: dict) -> None:
    router = run.get("router") or {}
    page.heading("Router")
    rows = [["name clients ask for", str(router.get("model") or "-")],
            ["URL during the run", str(router.get("url") or "-")]]
    page.table(["router (LiteLLM's proxy)", ""], rows, table_id="router")
    if (folder / ROUTER_CONFIG).is_file():
        page.link_table(["configuration"], [(ROUTER_CONFIG, [f"{ROUTER_CONFIG} (the routing "
                                                             "rules; the key is not in it)"])])


def _fleet_classes(page: Page, metrics: dict, run: dict) -> None:
    rows = class_rows(metrics)
    if not rows:
        return
    sent_to = {cls: name for name, item in (run.get("instances") or {}).items()
               for cls in item.get("classes") or []}
    page.heading("Per class (through the router, ms)")
    page.table([*CLASS_COLUMNS, "instance (rules)"],
               [[*row, sent_to.get(row[0], "-")] for row in rows], table_id="classes")


def _fleet_instances(page: Page, metrics: dict, run: dict) -> None:
    rows = instance_rows(metrics)
    problems = (metrics.get("routing") or {}).get("problems") or []
    page.heading("Per instance")
    if not rows:
        page.paragraph("no per-instance figures were archived (the run ended before the "
                       "load)", "muted")
        return
    if problems:
        page.verdict("routing mismatch: " + "; ".join(problems), "bad")
    else:
        page.verdict("every instance served what the routing rules sent it", "ok")
    urls = {name: str(item.get("base_url") or "-")
            for name, item in (run.get("instances") or {}).items()}
    page.table([*INSTANCE_COLUMNS, "URL during the run"],
               [[*row, urls.get(row[0], "-")] for row in rows], table_id="instances")
    page.paragraph("served: the instance's own count (vllm:request_success_total, warm-up "
                   "included); rules sent: each request's class and prompt length replayed "
                   "through the fleet's routing rules", "muted")


def fleet_section(page: Page, folder: Path, status: dict) -> None:
    """A fleet run (``fleet/run.py``): its figures through the router, the router, each
    class with the instance the rules send it to, and each instance: what it served,
    counted by its own ``/metrics``, against what the rules sent it (``metrics.json``
    ``classes``, ``instances``, ``routing``; ``run.json`` ``router``, ``instances``)."""
    run_section(page, folder, status)
    metrics, run = read_json(folder, METRICS_FILE), read_json(folder, RUN_FILE)
    _fleet_router(page, folder, run)
    if metrics:
        _fleet_classes(page, metrics, run)
        _fleet_instances(page, metrics, run)


SECTIONS: dict[str, Any] = {"run": run_section, "bench": run_section, "server": run_section,
                            "sweep": sweep_section, "tune": tune_section,
                            "optimize": optimize_section, "fleet": fleet_section}
