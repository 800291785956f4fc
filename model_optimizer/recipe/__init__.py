"""Recipes: load safely, migrate, override, validate, resolve defaults, render for vLLM.

Pure: reads and writes recipe files only; no hardware probing, no processes.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from model_optimizer.errors import Diagnostic, RecipeError, RecipeWarning
from model_optimizer.recipe.migrate import migrate
from model_optimizer.recipe.overrides import (
    Variation,
    apply_variations,
    archived_overrides,
    parse_overrides,
    variations_of,
)
from model_optimizer.recipe.rules import check_rules, flag_warnings
from model_optimizer.recipe.schema import CURRENT_VERSION, fill_defaults, recipe_schema
from model_optimizer.recipe.spec import RecipeSpec
from model_optimizer.recipe.validate import canonical_names, schema_diagnostics
from model_optimizer.recipe.yamlsource import SourceMap, parse_yaml, read_yaml_file

__all__ = ["CURRENT_VERSION", "LoadedRecipe", "Overrides", "RecipeError", "RecipeSpec", "Variation",
           "archived_overrides", "load_recipe", "load_recipe_text", "resolve"]

#: what a load applies on top of the file, in order: the user's ``--set`` texts (parsed
#: here, once) and typed variations
Overrides = Sequence[str | Variation]


@dataclass
class LoadedRecipe:
    """A recipe that passed every check, with everything needed to use and trace it."""

    path: Path | None
    source_text: str
    document: dict[str, Any]  # as written, migrated, with the variations set; no defaults added
    resolved: dict[str, Any]  # document with every default filled in
    source_map: SourceMap
    written_version: int
    #: the typed values set on the file, in order (parsed --set texts, then mopt's own)
    variations: list[Variation] = field(default_factory=list)
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

    @property
    def overrides(self) -> list[str]:
        """The user's ``--set`` texts, as given (run.json's ``overrides``)."""
        return [v.given for v in self.variations if v.given is not None]

    @property
    def varied_values(self) -> list[Variation]:
        """The values mopt set itself (a sweep's value, a command's flag), in order."""
        return [v for v in self.variations if v.given is None]

    def varied(self, values: Mapping[str, object], source: str) -> LoadedRecipe:
        """This recipe with ``values`` (dotted key -> typed value, e.g.
        ``{"engine.max_num_seqs": 64}``) set after its own variations, checked exactly as
        loading checks it (schema, rules, warnings): RecipeError names ``source`` ("sweep
        value 64") for a value it refuses, and the archive records it with the value."""
        return self.with_variations(variations_of(values, source))

    def with_variations(self, added: Sequence[Variation]) -> LoadedRecipe:
        """This recipe with ``added`` set after its own variations, checked as loaded."""
        data, smap = parse_yaml(self.source_text.encode("utf-8"), self.source_map.file)
        every = [*self.variations, *added]
        doc, resolved, version = _check(data, smap, every, [])
        return _warn(LoadedRecipe(self.path, self.source_text, doc, resolved, smap, version,
                                  every))


def resolve(document: dict[str, Any]) -> dict[str, Any]:
    """Defaults filled in from the schema, plus derived values (served name)."""
    # a mapping comes back a mapping (fill_defaults returns other values as they are)
    resolved = cast(dict[str, Any], fill_defaults(document, recipe_schema()))
    if isinstance(resolved.get("model"), dict) and not resolved["model"].get("served_name"):
        resolved["model"]["served_name"] = resolved["name"]
    return resolved


def _warn(loaded: LoadedRecipe) -> LoadedRecipe:
    """Attach and emit (as RecipeWarning) what is allowed but probably wrong."""
    loaded.warnings = flag_warnings(loaded.resolved, loaded.source_map)
    for diagnostic in loaded.warnings:
        warnings.warn(RecipeWarning(diagnostic.format()), stacklevel=3)
    return loaded


def _check(doc: object, smap: SourceMap, variations: Sequence[Variation],
           problems: list[Diagnostic]) -> tuple[dict[str, Any], dict[str, Any], int]:
    if not isinstance(doc, dict):
        raise RecipeError([Diagnostic(smap.file, 1, 1, "",
                                      "a recipe is a mapping of sections, not "
                                      f"{type(doc).__name__}", "start from recipes/tiny-cpu.yaml")])
    doc, written_version = migrate(doc, smap)
    doc, unknown = apply_variations(doc, variations, smap)
    problems = problems + unknown
    doc = canonical_names(doc)  # h100 -> H100: one rule of accelerator names
    problems.extend(schema_diagnostics(doc, smap))
    resolved = resolve(doc)
    reported = {p.path for p in problems}
    problems.extend(p for p in check_rules(resolved, smap) if p.path not in reported)
    if problems:
        raise RecipeError(problems)
    return doc, resolved, written_version


def load_recipe(path: str | Path, overrides: Overrides | None = None) -> LoadedRecipe:
    """Load, migrate, override and validate a recipe file. ``overrides`` are ``--set``
    texts and typed :class:`Variation` values, applied in order (a later one wins).

    Raises RecipeError listing every problem found.
    """
    data, smap, raw = read_yaml_file(path)
    variations, problems = parse_overrides(overrides or [])
    doc, resolved, version = _check(data, smap, variations, problems)
    text = raw.decode("utf-8")
    return _warn(LoadedRecipe(Path(path), text, doc, resolved, smap, version, variations))


def load_recipe_text(text: str, file: str = "<recipe>",
                     overrides: Overrides | None = None) -> LoadedRecipe:
    """Like :func:`load_recipe` for text that is not in a file (archives, tests)."""
    data, smap = parse_yaml(text.encode("utf-8"), file)
    variations, problems = parse_overrides(overrides or [])
    doc, resolved, version = _check(data, smap, variations, problems)
    return _warn(LoadedRecipe(None, text, doc, resolved, smap, version, variations))
