"""`mopt validate`: check recipes against the schema and mopt's cross-field rules."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from model_optimizer.cli.common import (
    JsonOption,
    SetOption,
    console,
    err_console,
    print_json,
    progress_console,
    report_error,
)
from model_optimizer.cli.completion import complete_recipe
from model_optimizer.cli.current import recipe_or_current
from model_optimizer.errors import EXIT_USAGE, Diagnostic, RecipeError, UsageError
from model_optimizer.fleet import is_fleet_file, load_fleet
from model_optimizer.history.drift import pinned_checkpoint_messages
from model_optimizer.recipe import LoadedRecipe, load_recipe
from model_optimizer.recipe.render import model_location

#: the folders ``mopt tiny-model`` builds, and the command that builds each
BUILT_BY = {"tiny-llama": "mopt tiny-model", "tiny-llama-trained": "mopt tiny-model --trained",
            "bed-llama": "mopt tiny-model --bed"}


def validate(
    recipes: Annotated[list[Path] | None, typer.Argument(
        help="Recipe files to check (default: the current recipe, see `mopt status`).",
        show_default=False, autocompletion=complete_recipe)] = None,
    overrides: SetOption = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Also fail (exit 2) when a pinned checkpoint (model.pins) differs "
                         "from the model folder on disk (default: warn).")] = False,
    as_json: JsonOption = False,
) -> None:
    """Check recipes: schema, cross-field rules, overrides. Exit 0 when all are valid, 2 if not.

    Every problem is reported at once, as file:line:column, with the dotted key path and
    a suggested fix. A recipe whose model.pins name a checkpoint hash is checked against
    the model folder (each changed file named). A local model folder (./, /, ~) that does not
    exist yet is a warning naming what builds it (--strict: exit 2). Nothing is run or
    written.
    """
    if not recipes:
        try:
            recipes = [recipe_or_current(None, "validate", progress_console(as_json))]
        except UsageError as exc:
            report_error(exc, as_json)
            raise typer.Exit(exc.exit_code) from None
    results = []
    for path in recipes:
        if is_fleet_file(path):
            results.append(_validate_fleet(path))
            continue
        try:
            loaded = load_recipe(path, overrides)
            drift = pinned_checkpoint_messages(loaded.resolved, loaded.base_dir)
            missing = missing_model(loaded)
            results.append({"file": str(path), "ok": not (strict and (drift or missing)),
                            "name": loaded.name, "revision": loaded.resolved["revision"],
                            "errors": [], "missing": [d.format() for d in missing],
                            "warnings": [d.to_dict() for d in loaded.warnings + missing],
                            "drift": drift, "text": "; ".join(drift)})
        except RecipeError as exc:
            results.append({"file": str(path), "ok": False,
                            "errors": [d.to_dict() for d in exc.diagnostics], "text": exc.format()})
    all_ok = all(r["ok"] for r in results)
    if as_json:
        print_json({"ok": all_ok, "recipes": [{k: v for k, v in r.items() if k != "text"}
                                              for r in results]})
    else:
        for result in results:
            for message in result.get("drift", []):
                err_console.print(f"[yellow]drift:[/] {message}", highlight=False)
            for message in result.get("missing", []):
                err_console.print(f"[yellow]warning:[/] {escape(message)}", highlight=False,
                                  soft_wrap=True)
            if result["ok"]:
                console.print(f"[green]ok[/]  {escape(result['file'])}  "
                              f"({result['name']}, revision {result['revision']})",
                              highlight=False, soft_wrap=True)
            else:
                err_console.print(f"[bold red]invalid[/]  {escape(result['file'])}",
                                  highlight=False)
                err_console.print(result["text"], highlight=False, soft_wrap=True, markup=False)
    if not all_ok:
        raise typer.Exit(EXIT_USAGE)


def missing_model(loaded: LoadedRecipe) -> list[Diagnostic]:
    """A warning at ``model.path`` when it names a local folder (./, /, ~) that does not
    exist: allowed (a fresh checkout validates before `mopt tiny-model` builds its model),
    but nothing can run until it does."""
    written = loaded.resolved["model"]["path"]
    location = Path(model_location(loaded.resolved, loaded.base_dir))
    if not written.startswith((".", "/", "~")) or location.is_dir():
        return []
    command = BUILT_BY.get(location.name)
    shown = os.path.relpath(location)
    shown = location if shown.startswith("..") else shown
    hint = (f"build it: {command} {shown}" if command else
            "download or build the model there, or fix model.path (a hub id is written "
            "without ./ or /)")
    return [loaded.source_map.diagnostic(("model", "path"), f"'{written}' resolves to "
                                         f"{location}, which does not exist", hint)]


def _validate_fleet(path: Path) -> dict:
    """A fleet file (kind: fleet): its own checks and every member's (docs/fleet.md)."""
    try:
        fleet = load_fleet(path)
    except RecipeError as exc:
        return {"file": str(path), "ok": False, "errors": [d.to_dict() for d in exc.diagnostics],
                "text": exc.format()}
    return {"file": str(path), "ok": True, "name": f"fleet {fleet.name}",
            "revision": fleet.resolved["revision"], "errors": [], "warnings": [], "drift": [],
            "text": ""}
