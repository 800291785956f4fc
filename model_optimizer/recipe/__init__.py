"""Recipes: load safely, migrate, override, validate, resolve defaults, render for vLLM.

Pure: reads and writes recipe files only; no hardware probing, no processes.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path

from model_optimizer.errors import Diagnostic, RecipeError, RecipeWarning
from model_optimizer.recipe.migrate import migrate
from model_optimizer.recipe.overrides import apply_overrides
from model_optimizer.recipe.rules import check_rules, flag_warnings
from model_optimizer.recipe.schema import CURRENT_VERSION, fill_defaults, recipe_schema
from model_optimizer.recipe.spec import RecipeSpec
from model_optimizer.recipe.validate import canonical_names, schema_diagnostics
from model_optimizer.recipe.yamlsource import SourceMap, parse_yaml, read_yaml_file

__all__ = ["CURRENT_VERSION", "LoadedRecipe", "RecipeError", "RecipeSpec", "load_recipe",
           "load_recipe_text", "resolve"]


@dataclass
class LoadedRecipe:
    """A recipe that passed every check, with everything needed to use and trace it."""

    path: Path | None
    source_text: str
    document: dict          # as written, migrated, with --set applied; no defaults added
    resolved: dict          # document with every default filled in
    source_map: SourceMap
    written_version: int
    overrides: list[str] = field(default_factory=list)
    warnings: list[Diagnostic] = field(default_factory=list)
    #: the typed, frozen view of ``resolved`` (built after validation; see recipe/spec.py)
    spec: RecipeSpec = field(init=False)

    def __post_init__(self) -> None:
        self.spec = RecipeSpec.of(self.resolved)

    @property
    def base_dir(self) -> Path | None:
        """Folder relative model paths are resolved from."""
        return self.path.resolve().parent if self.path else None

    @property
    def name(self) -> str:
        """The recipe's name."""
        return self.spec.name


def resolve(document: dict) -> dict:
    """Defaults filled in from the schema, plus derived values (served name)."""
    resolved = fill_defaults(document, recipe_schema())
    if isinstance(resolved.get("model"), dict) and not resolved["model"].get("served_name"):
        resolved["model"]["served_name"] = resolved["name"]
    return resolved


def _warn(loaded: LoadedRecipe) -> LoadedRecipe:
    """Attach and emit (as RecipeWarning) what is allowed but probably wrong."""
    loaded.warnings = flag_warnings(loaded.resolved, loaded.source_map)
    for diagnostic in loaded.warnings:
        warnings.warn(RecipeWarning(diagnostic.format()), stacklevel=3)
    return loaded


def _check(doc: object, smap: SourceMap, overrides: list[str]) -> tuple[dict, dict, int]:
    if not isinstance(doc, dict):
        raise RecipeError([Diagnostic(smap.file, 1, 1, "",
                                      "a recipe is a mapping of sections, not "
                                      f"{type(doc).__name__}", "start from recipes/tiny-cpu.yaml")])
    doc, written_version = migrate(doc, smap)
    doc, problems = apply_overrides(doc, overrides, smap)
    doc = canonical_names(doc)  # h100 -> H100: one rule of accelerator names
    problems.extend(schema_diagnostics(doc, smap))
    resolved = resolve(doc)
    reported = {p.path for p in problems}
    problems.extend(p for p in check_rules(resolved, smap) if p.path not in reported)
    if problems:
        raise RecipeError(problems)
    return doc, resolved, written_version


def load_recipe(path: str | Path, overrides: list[str] | None = None) -> LoadedRecipe:
    """Load, migrate, override and validate a recipe file.

    Raises RecipeError listing every problem found.
    """
    data, smap, raw = read_yaml_file(path)
    overrides = list(overrides or [])
    doc, resolved, version = _check(data, smap, overrides)
    text = raw.decode("utf-8")
    return _warn(LoadedRecipe(Path(path), text, doc, resolved, smap, version, overrides))


def load_recipe_text(text: str, file: str = "<recipe>",
                     overrides: list[str] | None = None) -> LoadedRecipe:
    """Like :func:`load_recipe` for text that is not in a file (archives, tests)."""
    data, smap = parse_yaml(text.encode("utf-8"), file)
    overrides = list(overrides or [])
    doc, resolved, version = _check(data, smap, overrides)
    return _warn(LoadedRecipe(None, text, doc, resolved, smap, version, overrides))
