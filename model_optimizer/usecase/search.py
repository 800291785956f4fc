"""What the search commands (sweep, tune) share below the command line: the recipe an
interrupted search resumes with, preflighted before it relaunches."""

from __future__ import annotations

import json
from pathlib import Path

from model_optimizer.archive import runs_dir
from model_optimizer.errors import MoptError
from model_optimizer.recipe import LoadedRecipe, archived_overrides, load_recipe_text
from model_optimizer.usecase.notices import NoticeCallback, preflight_of


def archived_recipe(search_dir: Path) -> LoadedRecipe | None:
    """The recipe an interrupted sweep or tune resumes with (its given text and overrides),
    or None when the archive cannot tell (the resume itself then reports why)."""
    try:
        state = json.loads((search_dir / "state.json").read_text(encoding="utf-8"))
        given = (search_dir / "recipe.given.yaml").read_text(encoding="utf-8")
        loaded = load_recipe_text(given, str(state["recipe_file"]),
                                  archived_overrides(state.get("overrides"), state.get("varied")))
    except (OSError, ValueError, KeyError, TypeError, MoptError):
        return None
    loaded.path = Path(state["recipe_file"])  # relative model paths resolve from it
    return loaded


def check_resume(search_dir: Path, force: bool,
                 on_notice: NoticeCallback | None = None) -> None:
    """Preflight the recipe an interrupted search will relaunch (PreflightError on a
    refusal unless ``force``; its warnings told)."""
    loaded = archived_recipe(Path(search_dir))
    if loaded is not None:
        preflight_of(loaded, runs_dir(None), on_notice, force=force)
