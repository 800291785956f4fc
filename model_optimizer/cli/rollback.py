"""`mopt rollback runs/<id>`: restore a run's (or sweep's) recipe as a new revision."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from model_optimizer.archive import runs_dir
from model_optimizer.cli.common import (
    JsonOption,
    RunsDirOption,
    console,
    handle_errors,
    print_json,
    progress_console,
)
from model_optimizer.cli.completion import complete_recipe, complete_run
from model_optimizer.cli.outcomes import print_notice, print_verification
from model_optimizer.cli.progress import RunProgress
from model_optimizer.history.rollback import RollbackResult
from model_optimizer.usecase.rollback import rollback as run_rollback


def _print_restored(result: RollbackResult) -> None:
    console.print(f"[green]rolled back[/] {escape(str(result.recipe_file))} to the recipe of "
                  f"{escape(str(result.source))}: revision {result.previous_revision} -> "
                  f"{result.revision}", highlight=False, soft_wrap=True)
    for field, value in result.rebased.items():
        console.print(f"  {field} rebased to {value} (relative to the new file's folder)",
                      highlight=False, soft_wrap=True, markup=False)
    console.print(f"replaced revision archived in {result.archive}",
                  highlight=False, soft_wrap=True, markup=False)


@handle_errors
def rollback(
    ref: Annotated[str, typer.Argument(help="The run or sweep to restore: runs/<id>, an id "
                                            "or a unique prefix.", metavar="RUN",
                                       show_default=False, autocompletion=complete_run)],
    recipe: Annotated[Path | None, typer.Option(
        "--recipe", help="Recipe file to roll back (default: the one the run or sweep "
                         "recorded); relative paths in the restored recipe are rebased to "
                         "its folder.", autocompletion=complete_recipe)] = None,
    apply_it: Annotated[bool, typer.Option(
        "--apply", help="Then re-measure the restored revision with the same workload and "
                        "judge it as `mopt verify` does (against the noise).")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="Overwrite the target even when it is not a recipe of the same "
                        "name.")] = False,
    runs_dir_opt: RunsDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Make RUN's recipe the current revision of its recipe file again.

    A run restores the recipe it ran (recipe.given.yaml with its --set overrides); a sweep
    restores the recipe it wrote. The file gets a NEW revision (current + 1, taken under a
    lock beside the file) whose validated block records `by: rollback` and `rollback_of:
    RUN`, with pins of the checkpoint it serves; the file being replaced is archived first
    under runs/ (kind rollback). The archive is verified first. A restored recipe whose
    local model folder does not exist from the target's folder is refused.

    Exit codes: 0 done (and, with --apply, the revision holds: `mopt verify`'s rule); 2 bad
    input or a broken archive; 3/5 the relaunched server failed; 4 --apply ran to the end
    but a figure regressed beyond the noise (as a run that missed its SLOs: 1 is only
    `plan`'s "does not fit"); 2 also when --apply's window was client-bound (not judged,
    as `mopt verify`).
    """
    if not apply_it:
        result = run_rollback(ref, recipe=recipe, force=force, runs_base=runs_dir(runs_dir_opt))
        if as_json:
            print_json(result.to_dict())
        else:
            _print_restored(result.restored)
        return
    with RunProgress(progress_console(as_json)) as progress:
        result = run_rollback(ref, recipe=recipe, force=force, reverify=True,
                              runs_base=runs_dir(runs_dir_opt), on_event=progress,
                              on_notice=print_notice)
    if as_json:
        print_json(result.to_dict())
    else:
        _print_restored(result.restored)
        if result.verification is not None:
            print_verification(result.verification)
    raise typer.Exit(result.exit_code)
