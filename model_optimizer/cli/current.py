"""The recipe a command works on (given, or the runs dir's current one) and its preflight."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from model_optimizer.archive import runs_dir
from model_optimizer.cli.completion import complete_recipe
from model_optimizer.history.current import require_current
from model_optimizer.recipe import LoadedRecipe, Overrides

OptionalRecipeArg = Annotated[Path | None, typer.Argument(
    help="Recipe YAML file (default: the current recipe, the one last applied, swept, "
         "tuned or rolled back under the runs dir; see `mopt status`).",
    show_default=False, metavar="RECIPE", autocompletion=complete_recipe)]
ForceOption = Annotated[bool, typer.Option(
    "--force", help="Launch even when the preflight says the launch would fail (an accelerator "
                    "this machine lacks, a hub model not in the cache, a taken port).")]


def recipe_or_current(recipe: Path | None, command: str, out: Console,
                      runs_dir_opt: Path | None = None) -> Path:
    """``recipe``, or the current recipe of the runs dir, announced on ``out``."""
    if recipe is not None:
        return recipe
    current = require_current(runs_dir(runs_dir_opt), command)
    out.print(current.announce(), highlight=False, markup=False, soft_wrap=True)
    return current.path


def check_before_launch(loaded: LoadedRecipe, force: bool, out: Console,
                        runs_dir_opt: Path | None = None) -> None:
    """Preflight ``loaded`` (its archive under ``runs_dir(runs_dir_opt)``): exit 2
    (PreflightError) on a refusal, else print warnings."""
    from model_optimizer.preflight import enforce

    for line in enforce(loaded, force=force, runs_base=runs_dir(runs_dir_opt)):
        out.print(f"preflight: {line}", style="yellow", highlight=False, markup=False,
                  soft_wrap=True)


def load_chosen(recipe: Path | None, overrides: Overrides | None, command: str,
                as_json: bool, runs_dir_opt: Path | None = None) -> LoadedRecipe:
    """Choose (``recipe``, or the current one announced on the console, on stderr with
    ``--json``) and load the recipe a command works on."""
    from model_optimizer.cli.common import progress_console
    from model_optimizer.recipe import load_recipe

    path = recipe_or_current(recipe, command, progress_console(as_json),
                             runs_dir_opt)
    return load_recipe(path, overrides)


@dataclass(frozen=True)
class SearchArgs:
    """What ``mopt sweep`` and ``mopt tune`` are given besides their own flags: RECIPE or
    --resume, --set, --runs-dir, --output, --model-config, --force, --no-quality-gate."""

    recipe: Path | None
    resume: Path | None
    overrides: list[str] | None
    runs_dir: Path | None
    output: Path | None
    model_config: Path | None
    force: bool
    no_quality_gate: bool
