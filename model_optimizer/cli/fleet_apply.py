"""`mopt apply FLEET`: launch the instances and the router, load through the router, report
overall, per class and per instance (what each served against what the rules sent it)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from model_optimizer.archive import runs_dir
from model_optimizer.archive.report import fmt
from model_optimizer.cli.common import console, print_json, progress_console
from model_optimizer.cli.outcomes import print_outcome
from model_optimizer.cli.progress import RunProgress
from model_optimizer.fleet import load_fleet
from model_optimizer.fleet.finish import INSTANCE_COLUMNS
from model_optimizer.usecase.apply import apply_fleet, refuse_fleet_overrides


def instance_summary_table(metrics: dict) -> Table | None:
    """Per instance: served (its /metrics) against the rules, and its requests' figures."""
    instances = metrics.get("instances") or {}
    if not instances:
        return None
    table = Table(title="per instance (served: its own /metrics, warm-up included; ms)",
                  show_edge=False)
    for column in INSTANCE_COLUMNS:
        table.add_column(column, justify="left" if column in ("instance", "classes")
                         else "right")
    for name, item in instances.items():
        served = f"{item.get('served')}" + ("" if item.get("match") else " [red](MISMATCH)[/]")
        table.add_row(name, ", ".join(item.get("classes") or []) or "-", served,
                      str(item.get("sent_by_rules")), fmt(item.get("qps"), 2),
                      fmt(item.get("ttft_p50_ms")), fmt(item.get("ttft_p99_ms")),
                      fmt(item.get("tpot_p50_ms"), 2), fmt(item.get("e2e_p99_ms")))
    return table


def apply_fleet_command(path: Path, overrides: list[str] | None, runs_dir_opt: Path | None,
                        as_json: bool) -> None:
    """Run the fleet at ``path``; exit like `mopt apply` (4 also for a routing mismatch)."""
    refuse_fleet_overrides(overrides)
    fleet = load_fleet(path)
    total = fleet.front.resolved["workload"].get("num_requests")
    with RunProgress(progress_console(as_json), total=total) as progress:
        outcome = apply_fleet(fleet, runs_base=runs_dir(runs_dir_opt), on_event=progress)
    if as_json:
        print_json(outcome.to_dict())
    else:
        print_outcome(outcome)
        table = instance_summary_table(outcome.metrics)
        if table is not None:
            console.print(table)
    raise typer.Exit(outcome.exit_code)
