"""`mopt plan FLEET`: each instance's memory in its share and the shared verdict (printing)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from model_optimizer.cli.common import console, print_json
from model_optimizer.fleet import load_fleet
from model_optimizer.fleet.plan import FleetPlan, plan_fleet
from model_optimizer.usecase.apply import refuse_fleet_overrides

GIB = 1024**3


def _gib(value: float) -> str:
    return f"{value / GIB:,.2f}"


def fleet_table(plan: FleetPlan) -> Table:
    """One row per instance: its classes, share, memory and sequences."""
    table = Table(show_edge=False, title=f"{plan.accelerator}: {plan.memory_gib:,.1f} GiB "
                  f"shared; the instances take {_gib(plan.used_bytes)} GiB")
    for column in ("instance", "classes", "share", "weights GiB", "activation GiB",
                   "KV GiB", "KV tokens", "seqs w/o preemption", "max_num_seqs", "verdict"):
        table.add_column(column, justify="left" if column in ("instance", "classes", "verdict")
                         else "right", no_wrap=column == "verdict",
                         min_width=12 if column == "verdict" else None)
    for item in plan.instances:
        r = item.report
        share = (f"{r.gpu_memory_utilization:g}" if r.gpu_memory_utilization is not None
                 else f"{_gib(r.kv_budget_bytes)} GiB KV")
        table.add_row(item.name, ", ".join(item.classes) or "-", share,
                      _gib(r.weight_bytes_per_device), _gib(r.reserve_bytes_per_device),
                      _gib(max(0, r.kv_budget_bytes)), f"{r.kv_tokens:,}",
                      f"{r.max_seqs_no_preemption:,} of {r.seq_len} tokens",
                      str(r.recipe_max_num_seqs), "fits" if item.fits else "does NOT fit")
    return table


def plan_fleet_command(path: Path, model_config: Path | None, overrides: list[str] | None,
                       as_json: bool) -> None:
    """Plan the fleet at ``path``; exit 1 when it does not fit."""
    refuse_fleet_overrides(overrides)
    fleet = load_fleet(path)
    plan = plan_fleet(fleet, model_config)
    if as_json:
        print_json({"fleet": fleet.name, **plan.to_dict()})
    else:
        console.rule(f"plan: fleet {fleet.name} ({len(plan.instances)} instances)")
        console.print(fleet_table(plan))
        for item in plan.instances:
            for label, items, style in (("problem", item.report.problems, "bold red"),
                                        ("warning", item.report.warnings, "yellow")):
                for text in items:
                    console.print(f"[{style}]{label}:[/] {item.name}: {escape(str(text))}",
                                  highlight=False)
        style = "green" if plan.fits else "bold red"
        console.print(f"verdict: [{style}]{escape(plan.verdict())}[/]", highlight=False)
    if not plan.fits:
        raise typer.Exit(1)
