"""Recipe format migrations: a chain of ``vN -> vN+1`` functions run before validation.

Only format 1 exists today. When format 2 arrives, add ``MIGRATIONS[1] = _v1_to_v2`` and bump
``CURRENT_VERSION`` in ``schema.py``; old recipes keep loading, one step at a time.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable
from typing import Any

from model_optimizer.errors import RecipeError, RecipeWarning
from model_optimizer.recipe.schema import CURRENT_VERSION
from model_optimizer.recipe.yamlsource import SourceMap

Migration = Callable[[dict[str, Any]], dict[str, Any]]

#: from-version -> function producing the next version's document
MIGRATIONS: dict[int, Migration] = {}


def migrate(doc: dict[str, Any], smap: SourceMap, current: int = CURRENT_VERSION,
            migrations: dict[int, Migration] | None = None) -> tuple[dict[str, Any], int]:
    """Bring ``doc`` to format ``current``; return it and the version it was written in."""
    chain = MIGRATIONS if migrations is None else migrations
    if "recipe_version" not in doc:
        close = difflib.get_close_matches("recipe_version", [str(k) for k in doc], n=1)
        if close:
            raise RecipeError([smap.diagnostic(
                (close[0],), f"recipe_version is missing; found unknown key '{close[0]}'",
                "did you mean 'recipe_version'?", prefer_key=True)])
        raise RecipeError([smap.diagnostic(
            (), "recipe_version is missing",
            f"add 'recipe_version: {current}' as the first key")])
    version = doc["recipe_version"]
    if isinstance(version, bool) or not isinstance(version, int):
        raise RecipeError([smap.diagnostic(
            ("recipe_version",), f"recipe_version must be a whole number, got {version!r}",
            f"use 'recipe_version: {current}'")])
    if version > current:
        raise RecipeError([smap.diagnostic(
            ("recipe_version",),
            f"written for recipe format {version}, but this mopt reads formats up to {current}",
            "update mopt from where it was installed (a checkout: git pull, then "
            "bash examples/setup-cpu.sh) to use this recipe")])
    original = version
    while version < current:
        step = chain.get(version)
        if step is None:
            raise RecipeError([smap.diagnostic(
                ("recipe_version",), f"recipe format {version} is not supported "
                f"(no migration from {version} to {version + 1})",
                f"formats 1 to {current} are supported")])
        doc = step(dict(doc))
        version += 1
        doc["recipe_version"] = version
    return retired_keys(doc, smap), original


def retired_keys(doc: dict[str, Any], smap: SourceMap) -> dict[str, Any]:
    """Format 1 keys that were retired without a new format: ``sweep.max_minutes`` is now
    ``sweep.budget`` (the same minutes), rewritten with a warning naming its line, so old
    recipes and archived revisions load."""
    sweep = doc.get("sweep")
    if not isinstance(sweep, dict) or "max_minutes" not in sweep:
        return doc
    sweep = dict(sweep)
    minutes = sweep.pop("max_minutes")
    sweep.setdefault("budget", minutes)
    warnings.warn(RecipeWarning(smap.diagnostic(
        ("sweep", "max_minutes"), "renamed to sweep.budget (read as budget here)",
        "rename the key to 'budget'", prefer_key=True).format()), stacklevel=4)
    return {**doc, "sweep": sweep}
