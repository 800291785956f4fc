"""Typed values set on a recipe document (:class:`Variation`), and the user's ``--set
dotted.key=value`` text parsed once into them, typed by the recipe schema.

Precedence is schema defaults < recipe file < variations, in order (a later one wins). A
variation records where its value came from (``--set engine.max_num_seqs=32``, ``sweep
value 64``): diagnostics about the value name that source, and run archives keep it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from model_optimizer.errors import Diagnostic, RecipeError
from model_optimizer.recipe.schema import allowed_keys, schema_types, subschema
from model_optimizer.recipe.validate import did_you_mean
from model_optimizer.recipe.yamlsource import SourceMap

SOURCE = "--set"


@dataclass(frozen=True)
class Variation:
    """One typed value for the dotted recipe key ``key``, and where it came from.

    ``given`` is the user's ``--set`` text when the value came from one (archived as the
    run's overrides); None for a value mopt set itself (a sweep's value, a flag)."""

    key: str
    value: object
    source: str
    given: str | None = None

    @property
    def path(self) -> tuple[str, ...]:
        """The key as a document path: ``("engine", "max_num_seqs")``."""
        return tuple(self.key.split("."))

    def set_text(self) -> str:
        """The ``key=value`` text ``--set`` (and a fleet instance's ``set:``) reads back as
        this variation: the one place a variation becomes override text (the inverse of
        :func:`parse_override`, the value written as YAML)."""
        value = yaml.safe_dump(self.value, default_flow_style=True, width=4096)
        return self.key + "=" + value.removesuffix("\n...\n").strip()

    def to_dict(self) -> dict[str, Any]:
        """JSON form (run.json's ``varied``, a search's state)."""
        return {"key": self.key, "value": self.value, "source": self.source}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Variation:
        """Inverse of :meth:`to_dict`."""
        return cls(str(data["key"]), data.get("value"), str(data.get("source") or "archive"))


def variations_of(values: Mapping[str, object], source: str) -> list[Variation]:
    """``{"engine.max_num_seqs": 64}`` as variations, each from ``source`` (a whole float
    for an integer key recorded as the int it sets)."""
    return [Variation(key, _typed_for(key, value), source) for key, value in values.items()]


def _typed_for(key: str, value: object) -> object:
    node = subschema(tuple(key.split(".")))
    return value if node is None else _typed(value, schema_types(node))


def archived_overrides(overrides: Iterable[str] | None,
                       varied: Iterable[Mapping[str, Any]] | None) -> list[str | Variation]:
    """What an archive recorded (run.json's or a search state's ``overrides`` texts and
    ``varied`` values) as a load's overrides again, in their order."""
    return [*(overrides or []), *(Variation.from_dict(item) for item in varied or [])]


def _parse_value(text: str, types: set[str]) -> object:
    """Interpret ``text`` as the schema's type: plain strings stay strings."""
    if types == {"string"} or (types <= {"string", "null"} and text.lower() not in ("null", "~")):
        return text
    try:
        return yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError:
        return text


def _unknown_key(key: str, where: str) -> Diagnostic | None:
    """Why ``key`` names no recipe key (None when it names one), with the nearest names."""
    path = tuple(key.split("."))
    if not all(path):
        return Diagnostic(where, None, None, key, "empty key part",
                          "write --set section.key=value")
    if subschema(path) is not None:
        return None
    parent = path[:-1]
    choices = allowed_keys(parent) if subschema(parent) is not None else allowed_keys(())
    wrong = path[-1] if subschema(parent) is not None else path[0]
    hint = did_you_mean(wrong, choices) or f"known keys: {', '.join(choices)}"
    return Diagnostic(where, None, None, key, f"no recipe key '{key}'", hint)


def parse_value(key: str, text: str) -> object:
    """A command-line flag's text for the known recipe key ``key`` typed as ``--set`` types
    it (``"2.5"`` for ``workload.request_rate`` is 2.5, ``"inf"`` stays ``"inf"``)."""
    node = subschema(tuple(key.split(".")))
    return text if node is None else _parse_value(text, schema_types(node))


def parse_override(item: str) -> Variation:
    """One ``--set key=value`` as a typed variation; raise RecipeError naming the fix."""
    where = f"{SOURCE} {item}"
    if "=" not in item:
        raise RecipeError([Diagnostic(where, None, None, "", f"'{item}' has no '='",
                                      "write --set section.key=value, e.g. "
                                      "--set engine.max_num_seqs=32")])
    key, text = item.split("=", 1)
    key = key.strip()
    if problem := _unknown_key(key, where):
        raise RecipeError([problem])
    node = subschema(tuple(key.split("."))) or {}  # a known key (_unknown_key): never {}
    return Variation(key, _parse_value(text, schema_types(node)), where, given=item)


def parse_overrides(items: Iterable[str | Variation]) -> tuple[list[Variation], list[Diagnostic]]:
    """Every ``--set`` text of ``items`` parsed (variations pass through, in order), and
    the problems of those that cannot be."""
    out: list[Variation] = []
    problems: list[Diagnostic] = []
    for item in items:
        if isinstance(item, Variation):
            out.append(item)
            continue
        try:
            out.append(parse_override(item))
        except RecipeError as exc:
            problems.extend(exc.diagnostics)
    return out, problems


def _typed(value: object, types: set[str]) -> object:
    """A whole float for an integer-only key as an int (64.0 from a sweep's arithmetic is
    64, never ``64.0`` on vLLM's command line); anything else unchanged."""
    if isinstance(value, float) and value.is_integer() and "integer" in types \
            and "number" not in types:
        return int(value)
    return value


def apply_variations(doc: dict[str, Any], variations: Sequence[Variation],
                     smap: SourceMap) -> tuple[dict[str, Any], list[Diagnostic]]:
    """A copy of ``doc`` with the variations on known keys set, and the problems of the
    others. Each set path's source is recorded in ``smap``, so later diagnostics name it."""
    problems: list[Diagnostic] = []
    result: dict[str, Any] = {key: _deep_copy(value) for key, value in doc.items()}
    for variation in variations:
        if problem := _unknown_key(variation.key, variation.source):
            problems.append(problem)
            continue
        path = variation.path
        target = result
        for part in path[:-1]:
            existing = target.get(part)
            if not isinstance(existing, dict):
                existing = {}
                target[part] = existing
            target = existing
        node = subschema(path) or {}  # a known key (_unknown_key): never {}
        target[path[-1]] = _typed(_deep_copy(variation.value), schema_types(node))
        smap.overridden[path] = variation.source
    return result, problems


def apply_overrides(doc: dict[str, Any], overrides: Sequence[str | Variation],
                    smap: SourceMap) -> tuple[dict[str, Any], list[Diagnostic]]:
    """A copy of ``doc`` with the valid ``--set`` texts (and variations) applied, in order,
    and the problems of the others."""
    variations, problems = parse_overrides(overrides)
    result, unknown = apply_variations(doc, variations, smap)
    return result, problems + unknown


def _deep_copy(value: object) -> object:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value
