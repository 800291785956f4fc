"""`mopt report`: the self-contained HTML report of a run, sweep, tune or optimize."""

from __future__ import annotations

import webbrowser
from pathlib import Path
from typing import Annotated

import typer

from model_optimizer.archive import runs_dir
from model_optimizer.cli.common import RunsDirOption, console, handle_errors
from model_optimizer.cli.completion import complete_run
from model_optimizer.usecase.report import report as run_report


@handle_errors
def report(
    ref: Annotated[str, typer.Argument(help="Run, sweep, tune or optimize id, a unique prefix, "
                                       "or a folder.", metavar="ID",
                                       autocompletion=complete_run)],
    output: Annotated[Path | None, typer.Option(
        "--output", "-o", help="Where to write the HTML file (default: the archive's own "
        "report.html when it has one, else ./mopt-report-<id>.html).")] = None,
    open_it: Annotated[bool, typer.Option("--open", help="Open it in the web browser.")] = False,
    runs_dir_opt: RunsDirOption = None,
) -> None:
    """Write one archive's HTML report: its figures with their 95% intervals, a sweep's curve
    with the chosen value, a tune's trials, an optimize's before/after table, the engine
    configuration and links to the step archives. One file, no network. The archive is
    verified against its manifest first; a sealed archive is never changed (the report goes
    next to it unless it already holds one). Exit 0, or 2 for an unknown or broken archive."""
    target = run_report(ref, output=output, runs_base=runs_dir(runs_dir_opt)).path
    console.print(f"report: {target}", highlight=False, markup=False, soft_wrap=True)
    if open_it:
        webbrowser.open(target.resolve().as_uri())
