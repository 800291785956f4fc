"""`mopt runs`: the table of archived runs and sweeps; `mopt runs show ID`: one of them."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Annotated

import typer

from model_optimizer.archive import index, runs_dir
from model_optimizer.archive.names import (
    GIVEN_RECIPE,
    METRICS_FILE,
    REPORT_FILE,
    WRITTEN_RECIPE,
)
from model_optimizer.archive.report import fmt
from model_optimizer.cli.common import JsonOption, RunsDirOption, console, handle_errors, print_json
from model_optimizer.cli.completion import complete_run
from model_optimizer.errors import UsageError
from model_optimizer.history import archives
from model_optimizer.history.current import moment_of
from model_optimizer.history.verifications import describe_environment
from model_optimizer.shown import printable
from model_optimizer.telemetry import hardware_label

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}

runs_app = typer.Typer(help="List archived runs and sweeps (newest first); `show` one.",
                       invoke_without_command=True, no_args_is_help=False,
                       rich_markup_mode=None)


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``2h``, ``3d``, ``30m``, ``1w`` ago, or an ISO date / date-time (UTC if no zone)."""
    now = now or datetime.now(UTC)
    match = _DURATION.match(text.strip().lower())
    if match:
        try:
            return now - timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})
        except (OverflowError, ValueError):
            return datetime.min.replace(tzinfo=UTC)  # further back than any run
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--since {text}: give a duration like 2h, 3d, 30m, 1w or an ISO "
                         "date like 2026-01-31 (or 2026-01-31T12:00)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def select(rows: list[dict], recipe: str | None, status: str | None,
           since: datetime | None, steps: bool) -> list[dict]:
    """Filter index rows: recipe name, status (``failed`` matches every ``failed:*``), time."""
    out = []
    for row in rows:
        shown = index.shown_status(row)
        if not steps and row.get("parent"):
            continue
        if recipe and row.get("recipe_name") != recipe:
            continue
        if status and shown != status and not shown.startswith(f"{status}:"):
            continue
        created = moment_of(row.get("created_at"))
        if since and (created is None or created < since):
            continue
        out.append({**row, "status": shown})
    return out


HEADERS = ("id", "time (UTC)", "kind", "recipe", "rev", "status", "qps", "TTFT p99 ms",
           "vLLM", "hardware")
RIGHT = {"rev", "qps", "TTFT p99 ms"}


def table_lines(rows: list[dict]) -> list[str]:
    """The runs as a plain aligned text table (no wrapping: greppable, pipe-friendly)."""
    cells = [HEADERS] + [
        (row["id"], (row.get("created_at") or "")[:19].replace("T", " "), row["kind"],
         row.get("recipe_name") or "-", fmt(row.get("recipe_revision")), row["status"],
         fmt(row.get("qps"), 2), fmt(row.get("ttft_p99_ms")), row.get("vllm_version") or "-",
         row.get("hardware") or "-") for row in rows]
    widths = [max(len(str(line[i])) for line in cells) for i in range(len(HEADERS))]
    out = []
    for line in cells:
        out.append("  ".join(str(value).rjust(width) if name in RIGHT else
                             str(value).ljust(width)
                             for name, value, width in zip(HEADERS, line, widths, strict=True))
                   .rstrip())
    return out


@runs_app.callback()
@handle_errors
def runs(
    ctx: typer.Context,
    recipe: Annotated[str | None, typer.Option(help="Only runs of this recipe name.")] = None,
    status: Annotated[str | None, typer.Option(
        help="Only this status: ok, interrupted, running, abandoned, failed (any failed:*) "
             "or failed:<class>.")] = None,
    since: Annotated[str | None, typer.Option(
        help="Only runs since: a duration (2h, 3d) or an ISO date.")] = None,
    steps: Annotated[bool, typer.Option("--steps", help="Include the step runs of sweeps.")]
    = False,
    reindex: Annotated[bool, typer.Option("--reindex", help="Rebuild runs/index.sqlite from "
                                          "the folders first.")] = False,
    runs_dir_opt: RunsDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """List archived runs and sweeps, newest first (`mopt runs show ID` for one)."""
    if ctx.invoked_subcommand is not None:
        return
    root = runs_dir(runs_dir_opt)
    if reindex and root.is_dir():
        counts = index.refresh(root, full=True)
        if not as_json:
            console.print(f"reindexed {root}: {counts['total']} archives", highlight=False,
                          markup=False, soft_wrap=True)
    moment = parse_since(since) if since else None
    rows = select(index.all_rows(root), recipe, status, moment, steps)
    if as_json:
        print_json(rows)
        return
    if not rows:
        console.print(f"no runs under {root}" + (" matching the filters" if
                                                  (recipe or status or since) else ""),
                      highlight=False, markup=False)
        return
    for line in table_lines(rows):  # an archive's fields may be forged: no terminal control
        console.print(printable(line, lines=False), highlight=False, markup=False,
                      soft_wrap=True)


def _show_lines(view: archives.ArchiveView) -> list[str]:
    status = view.status
    lines = [f"# {view.kind} {view.id}", f"folder: {view.path}",
             f"status: {view.status_text}  (finished {status.get('finished_at') or '-'})"]
    run = view.run
    if view.kind == "rollback":
        lines += [f"rollback of {run.get('rollback_of')}: {run.get('recipe_file')} revision "
                  f"{run.get('from_revision')} -> {run.get('to_revision')}"]
    elif view.kind == "verify":
        lines += [f"verification of {run.get('recipe_name')} revision "
                  f"{run.get('recipe_revision')} ({run.get('recipe_file') or '-'}) against "
                  f"{run.get('validated_run_id')}: verified on "
                  f"{describe_environment(run.get('environment') or {})}: "
                  f"{view.status.get('verdict') or view.status_text}"]
    elif run:
        versions = run.get("versions") or {}
        lines += [f"recipe: {run.get('recipe_name')} revision {run.get('recipe_revision')} "
                  f"from {run.get('recipe_file') or '-'}",
                  f"overrides: {' '.join(run.get('overrides') or []) or 'none'}",
                  f"vLLM {versions.get('vllm') or '-'}, hardware "
                  f"{hardware_label(run.get('hardware')) or '-'}"]
    recipe_name = WRITTEN_RECIPE if view.kind in ("rollback",) else GIVEN_RECIPE
    recipe_text = view.text(recipe_name)
    if recipe_text:
        lines += ["", f"## Recipe ({recipe_name})", "", recipe_text.rstrip()]
    report = view.text(REPORT_FILE)
    if report:
        lines += ["", report.rstrip()]
    return lines


@runs_app.command("show")
@handle_errors
def show(
    ref: Annotated[str, typer.Argument(help="Run or sweep id, a unique prefix, or a folder.",
                                       metavar="ID", autocompletion=complete_run)],
    runs_dir_opt: RunsDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print one run's recipe, figures and report (verified against its manifest first)."""
    view = archives.load(ref, runs_dir(runs_dir_opt))
    if as_json:
        print_json({"id": view.id, "kind": view.kind, "path": str(view.path),
                    "status": view.status, "run": view.run,
                    "metrics": view.json(METRICS_FILE) or None,
                    "summary": view.summary or None,
                    "recipe": view.text(GIVEN_RECIPE),
                    "report": view.text(REPORT_FILE)})
        return
    console.print(printable("\n".join(_show_lines(view))), highlight=False, markup=False,
                  soft_wrap=True)  # a server's error in the report, or a forged archive
