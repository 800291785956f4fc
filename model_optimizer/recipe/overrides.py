"""``--set dotted.key=value`` overrides, typed by the recipe schema.

Precedence is schema defaults < recipe file < ``--set`` (later ``--set`` wins over earlier).
"""

from __future__ import annotations

import yaml

from model_optimizer.errors import Diagnostic, RecipeError
from model_optimizer.recipe.schema import allowed_keys, schema_types, subschema
from model_optimizer.recipe.validate import did_you_mean
from model_optimizer.recipe.yamlsource import SourceMap

SOURCE = "--set"


def _parse_value(text: str, types: set[str]) -> object:
    """Interpret ``text`` as the schema's type: plain strings stay strings."""
    if types == {"string"} or (types <= {"string", "null"} and text.lower() not in ("null", "~")):
        return text
    try:
        return yaml.safe_load(text) if text.strip() else ""
    except yaml.YAMLError:
        return text


def parse_override(index: int, item: str) -> tuple[tuple, object]:
    """Split and type one ``key=value``; raise RecipeError naming the fix."""
    where = f"{SOURCE} {item}"
    if "=" not in item:
        raise RecipeError([Diagnostic(where, None, None, "", f"'{item}' has no '='",
                                      "write --set section.key=value, e.g. "
                                      "--set engine.max_num_seqs=32")])
    key, text = item.split("=", 1)
    path = tuple(part for part in key.strip().split("."))
    if not all(path):
        raise RecipeError([Diagnostic(where, None, None, key, "empty key part",
                                      "write --set section.key=value")])
    node = subschema(path)
    if node is None:
        parent = path[:-1]
        choices = allowed_keys(parent) if subschema(parent) is not None else allowed_keys(())
        wrong = path[-1] if subschema(parent) is not None else path[0]
        hint = did_you_mean(wrong, choices) or f"known keys: {', '.join(choices)}"
        raise RecipeError([Diagnostic(where, None, None, key.strip(),
                                      f"no recipe key '{key.strip()}'", hint)])
    return path, _parse_value(text, schema_types(node))


def apply_overrides(doc: dict, overrides: list[str],
                    smap: SourceMap) -> tuple[dict, list[Diagnostic]]:
    """A copy of ``doc`` with the valid overrides applied, and the problems of the others.

    The positions of overridden paths are recorded in ``smap`` so later diagnostics name
    the ``--set`` that put a value there.
    """
    problems: list[Diagnostic] = []
    result = _deep_copy(doc)
    for index, item in enumerate(overrides):
        try:
            path, value = parse_override(index, item)
        except RecipeError as exc:
            problems.extend(exc.diagnostics)
            continue
        target = result
        for part in path[:-1]:
            existing = target.get(part)
            if not isinstance(existing, dict):
                existing = {}
                target[part] = existing
            target = existing
        target[path[-1]] = value
        smap.overridden[path] = f"{SOURCE} {item}"
    return result, problems


def _deep_copy(value: object) -> object:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value
