"""`mopt rollback runs/<id>`: restore a run's (or sweep's) recipe as a new revision."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from model_optimizer.archive import runs_dir
from model_optimizer.archive.report import fmt
from model_optimizer.cli.apply import print_outcome
from model_optimizer.cli.common import (
    JsonOption,
    RunsDirOption,
    console,
    err_console,
    handle_errors,
    print_json,
    progress_console,
)
from model_optimizer.cli.completion import complete_recipe, complete_run
from model_optimizer.cli.progress import RunProgress
from model_optimizer.errors import EXIT_OK, EXIT_SLO_FAILED
from model_optimizer.history.diff import render
from model_optimizer.history.drift import check_drift
from model_optimizer.history.rollback import TOLERANCE, Verification, reverify
from model_optimizer.history.rollback import rollback as restore
from model_optimizer.recipe import load_recipe
from model_optimizer.signals import terminate_as_interrupt


def _print_verification(check: Verification) -> None:
    for line in render(check.diff):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    console.print(f"\nRe-verification against the archived figures (tolerance "
                  f"{check.tolerance:.0%}):", highlight=False, soft_wrap=True)
    for item in check.checks:
        mark = "ok  " if item["ok"] else "FAIL"
        console.print(f"  {mark} {item['metric']:<12} archived {fmt(item['archived'], 2)}, "
                      f"now {fmt(item['measured'], 2)} "
                      f"({item['relative_difference']:.1%} apart)", highlight=False, soft_wrap=True)
    verdict = "[green]PASS[/]" if check.passed else "[bold red]FAIL[/]"
    console.print(f"{verdict}: the restored revision "
                  f"{'reproduces' if check.passed else 'does not reproduce'} its figures",
                  highlight=False, soft_wrap=True)


@handle_errors
def rollback(
    ref: Annotated[str, typer.Argument(help="The run or sweep to restore: runs/<id>, an id "
                                            "or a unique prefix.", metavar="RUN",
                                       show_default=False, autocompletion=complete_run)],
    recipe: Annotated[Path | None, typer.Option(
        "--recipe", help="Recipe file to roll back (default: the one the run or sweep "
                         "recorded).", autocompletion=complete_recipe)] = None,
    apply_it: Annotated[bool, typer.Option(
        "--apply", help="Then launch the restored revision with the same workload and "
                        "compare with the archived figures.")] = False,
    tolerance: Annotated[float, typer.Option(
        help="--apply: largest relative difference of QPS and p50 latencies that passes.")]
    = TOLERANCE,
    force: Annotated[bool, typer.Option(
        "--force", help="Overwrite the target even when it is not a recipe of the same "
                        "name.")] = False,
    runs_dir_opt: RunsDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make RUN's recipe the current revision of its recipe file again.

    A run restores the recipe it ran (recipe.given.yaml with its --set overrides); a sweep
    restores the recipe it wrote. The file gets a NEW revision (current + 1) whose
    validated block records `by: rollback` and `rollback_of: RUN`; the file being replaced
    is archived first under runs/ (kind rollback). The archive is verified first.

    Exit codes: 0 done (and, with --apply, the figures reproduced within --tolerance);
    2 bad input or a broken archive; 3/5 the relaunched server failed; 4 --apply ran to the
    end but the figures differ beyond the tolerance (as a run that missed its SLOs: 1 is
    only `plan`'s "does not fit").
    """
    result = restore(ref, runs_dir(runs_dir_opt), recipe, force=force)
    if not apply_it:
        if as_json:
            print_json(result.to_dict())
        else:
            console.print(f"[green]rolled back[/] {escape(str(result.recipe_file))} to the "
                          "recipe of "
                          f"{escape(str(result.source))}: revision {result.previous_revision} -> "
                          f"{result.revision}", highlight=False, soft_wrap=True)
            console.print(f"replaced revision archived in {result.archive}",
                          highlight=False, soft_wrap=True, markup=False)
        return
    terminate_as_interrupt()
    for message in check_drift(load_recipe(result.recipe_file).resolved):
        err_console.print(f"[yellow]drift:[/] {escape(message)}", highlight=False, soft_wrap=True)
    with RunProgress(progress_console(as_json)) as progress:
        check = reverify(result, tolerance, on_event=progress)
    if as_json:
        print_json({"rollback": result.to_dict(), "verification": check.to_dict()})
    else:
        console.print(f"rolled back {result.recipe_file} to revision {result.revision} "
                      f"(recipe of {result.source})", highlight=False, soft_wrap=True, markup=False)
        print_outcome(check.outcome)
        _print_verification(check)
    if not check.outcome.ok:
        raise typer.Exit(check.outcome.exit_code)
    raise typer.Exit(EXIT_OK if check.passed else EXIT_SLO_FAILED)
