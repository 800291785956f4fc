"""The end of a fleet run: its verdict (completed, SLOs, routing) and its archive's last
files (metrics, index row, report, status), written in ``finally``."""

from __future__ import annotations

from model_optimizer.archive import STATUS_OK, RunArchive, failed_status, utc_now
from model_optimizer.archive.entry import metric_fields
from model_optimizer.archive.names import FAILURE_FILE, METRICS_FILE, REPORT_FILE
from model_optimizer.archive.report import fmt, render_run_report
from model_optimizer.engine import Failure
from model_optimizer.fleet.spec import LoadedFleet
from model_optimizer.fsutil import disk_full
from model_optimizer.runner import NO_REQUEST_COMPLETED, RunOutcome

INSTANCE_COLUMNS = ("instance", "classes", "served", "rules sent", "req/s", "TTFT p50",
                    "TTFT p99", "TPOT p50", "E2E p99")


def judge(archive: RunArchive, measurement, outcome: RunOutcome) -> None:
    """Ok once a request completed; a routing mismatch is a missed goal (exit 4) like a
    missed SLO, listed with them as ``routing: ...``."""
    metrics = outcome.metrics
    problems = (metrics.get("routing") or {}).get("problems") or []
    if problems:
        metrics["slo_violations"] = [*metrics.get("slo_violations", []),
                                     *(f"routing: {p}" for p in problems)]
        metrics["slo_met"] = False
    if outcome.figures.completed:
        outcome.status = STATUS_OK
        return
    errors = list(dict.fromkeys(r.error for r in measurement.records if r.error))[:5]
    outcome.failure = Failure(NO_REQUEST_COMPLETED, "no measured request succeeded; the "
                              "errors are in requests.jsonl", errors)
    outcome.status = failed_status(NO_REQUEST_COMPLETED)
    archive.write_json(FAILURE_FILE, outcome.failure.to_dict())


def instance_rows(metrics: dict) -> list[list[str]]:
    """One row of text cells per instance (``INSTANCE_COLUMNS``): what it served against
    what the rules sent it, and its figures (report.md, the HTML report)."""
    rows = []
    for name, item in (metrics.get("instances") or {}).items():
        mark = "" if item.get("match") else " (MISMATCH)"
        rows.append([name, ", ".join(item.get("classes") or []) or "-",
                     f"{item.get('served')}{mark}", _count(item.get("sent_by_rules")),
                     fmt(item.get("qps"), 2), fmt(item.get("ttft_p50_ms")),
                     fmt(item.get("ttft_p99_ms")), fmt(item.get("tpot_p50_ms"), 2),
                     fmt(item.get("e2e_p99_ms"))])
    return rows


def _count(value: int | None) -> str:
    return "-" if value is None else str(value)


def instance_table(metrics: dict) -> list[str]:
    """Markdown table: per instance, what it served against what the rules sent it."""
    rows = instance_rows(metrics)
    if not rows:
        return []
    return ["| " + " | ".join(INSTANCE_COLUMNS) + " |",
            "|---|---|" + "---:|" * (len(INSTANCE_COLUMNS) - 2),
            *("| " + " | ".join(row) + " |" for row in rows)]


def fleet_report(archive: RunArchive, fleet: LoadedFleet, outcome: RunOutcome) -> str:
    """report.md: the run's report (overall, per class) and a per-instance section."""
    text = render_run_report(archive.id, fleet.front.resolved, outcome)
    table = instance_table(outcome.metrics or {})
    if not table:
        return text
    head = (f"## Per instance\n\nThe router ({fleet.router.model}) sent every request; "
            "`served` is each instance's own count (vllm:request_success_total, warm-up "
            "included), `rules sent` what the fleet's routing rules send it.\n\n")
    if fleet.router.balance is not None:
        head = (f"## Per instance\n\nThe router ({fleet.router.model}) balanced every "
                f"request over the instances ({fleet.router.balance}, no class rule); "
                "`served` is each instance's own count (warm-up included); which instance "
                "answered a request is not known, so the figures are the run's.\n\n")
    return text.rstrip("\n") + "\n\n" + head + "\n".join(table) + "\n"


def finalize(archive: RunArchive, fleet: LoadedFleet, outcome: RunOutcome) -> None:
    """Write metrics, index row, report and status; seal. Runs in ``finally``."""
    try:
        archive.write_json(METRICS_FILE, {**outcome.metrics,
                                          "telemetry_peaks": outcome.telemetry_peaks})
        archive.write_entry(**metric_fields(outcome.metrics))
        archive.write_text(REPORT_FILE, fleet_report(archive, fleet, outcome))
    except OSError as exc:
        if not disk_full(exc):
            raise
    finally:
        archive.set_status(outcome.status, phase="finished", finished_at=utc_now(),
                           slo_met=outcome.slo_met if outcome.ok else None,
                           failure=outcome.failure.to_dict() if outcome.failure else None)
        archive.close()
