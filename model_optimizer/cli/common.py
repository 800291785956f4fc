"""Pieces shared by the CLI commands: options, error reporting, output helpers."""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from model_optimizer.errors import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    MoptError,
    RecipeError,
    RecipeWarning,
    UsageError,
)
from model_optimizer.shown import printable
from model_optimizer.signals import ignore_interrupts

#: the width of output into a pipe or file (no terminal, no $COLUMNS): tables get room and
#: printed lines are never wrapped, so the commands mopt prints stay whole
PIPE_WIDTH = 200


def make_console(stderr: bool = False) -> Console:
    """A console at the terminal's width; into a pipe or file, wide and without wrapping."""
    probe = Console(stderr=stderr)
    if probe.is_terminal or os.environ.get("COLUMNS"):
        return probe
    return Console(stderr=stderr, width=PIPE_WIDTH, soft_wrap=True)


console = make_console()
err_console = make_console(stderr=True)


_python_showwarning = warnings.showwarning


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    if issubclass(category, RecipeWarning):
        err_console.print(f"[yellow]warning:[/] {escape(str(message))}", highlight=False,
                          soft_wrap=True)
        return
    _python_showwarning(message, category, filename, lineno, file, line)


def show_recipe_warnings() -> None:
    """Print RecipeWarnings as ``warning: <file:line: message>`` on stderr, as mopt's own
    output, instead of Python's format (the source file and line of the warn() call)."""
    warnings.showwarning = _show_warning

SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", metavar="KEY=VALUE",
                 help="Override a recipe value, e.g. --set engine.max_num_seqs=32 "
                      "(repeatable; applied after the file, validated like it)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
NoQualityGateOption = Annotated[bool, typer.Option(
    "--no-quality-gate", help="Keep candidates that change the model's answers (quantized "
    "weights, a KV dtype) on speed alone when the recipe's quality section cannot gate them "
    "(without it: refused, exit 2); the report and the revision say so in bold.")]
RunsDirOption = Annotated[
    Path | None,
    typer.Option("--runs-dir", help="Where run archives go (default: $MOPT_RUNS_DIR or runs/).",
                 show_default=False)]
ModelConfigOption = Annotated[
    Path | None,
    typer.Option("--model-config", help="The model's config.json for the planner when the "
                 "weights are not on this machine (e.g. examples/llama-2-7b-config.json).")]
RevisionOutputOption = Annotated[Path | None, typer.Option(
    "--output", help="Write the new revision here instead of over RECIPE.")]
RecipeArg = Annotated[Path, typer.Argument(help="Recipe YAML file.", show_default=False,
                                          metavar="RECIPE")]


def progress_console(as_json: bool) -> Console:
    """Where progress and notices go: stderr with ``--json``, so stdout holds only the JSON."""
    return err_console if as_json else console


def print_json(data: Any) -> None:
    """JSON to stdout, plain (no rich markup), one document."""
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")
    sys.stdout.flush()


def report_error(exc: MoptError, as_json: bool = False) -> None:
    """Print a MoptError the way users should see it: no traceback."""
    if as_json and isinstance(exc, RecipeError):
        print_json({"ok": False, "errors": [d.to_dict() for d in exc.diagnostics]})
        return
    if as_json:
        print_json({"ok": False, "error": str(exc)})
        return
    err_console.print(f"[bold red]error:[/] {escape(printable(str(exc)))}", highlight=False,
                      soft_wrap=True)


def handle_errors(func: Callable) -> Callable:
    """Turn MoptError into its exit code and Ctrl-C into 130, with a clear message."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except MoptError as exc:
            report_error(exc, bool(kwargs.get("as_json")))
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            ignore_interrupts()  # more quick signals: no traceback on the way out
            err_console.print("[yellow]interrupted[/]")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except (OSError, sqlite3.Error, UnicodeDecodeError) as exc:  # a read-only or full
            # disk, a broken index, a file that is not text
            report_error(UsageError(f"{type(exc).__name__}: {exc}"), bool(kwargs.get("as_json")))
            raise typer.Exit(EXIT_USAGE) from None

    return wrapper
