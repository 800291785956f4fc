"""Access to the recipe JSON Schemas in ``schemas/`` and navigation inside them."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from model_optimizer.recipe.yamlsource import Path_

CURRENT_VERSION = 1
_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def schemas_dir() -> Path:
    """The folder holding ``recipe.vN.json``: packaged copy when installed, else the repo's."""
    for candidate in (_PACKAGE_DIR / "_schemas", _PACKAGE_DIR.parent / "schemas"):
        if (candidate / f"recipe.v{CURRENT_VERSION}.json").is_file():
            return candidate
    raise FileNotFoundError("schemas/recipe.v1.json not found next to the model_optimizer package")


@cache
def recipe_schema(version: int = CURRENT_VERSION) -> dict[str, Any]:
    """The JSON Schema of recipe format ``version``."""
    schema: dict[str, Any] = json.loads((schemas_dir() / f"recipe.v{version}.json").read_text())
    return schema


def subschema(path: Path_, schema: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The schema that governs the value at ``path`` (dict keys only), or None if unknown."""
    node = schema if schema is not None else recipe_schema()
    for key in path:
        props = node.get("properties", {})
        if key in props:
            node = props[key]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return None
    return node


def allowed_keys(path: Path_) -> list[str]:
    """Keys a mapping at ``path`` may hold (empty for open maps)."""
    node = subschema(path) or {}
    return list(node.get("properties", {}))


def schema_types(node: dict[str, Any]) -> set[str]:
    """JSON types a schema node admits (from type, enum, const and oneOf)."""
    types: set[str] = set()
    declared = node.get("type")
    if isinstance(declared, str):
        types.add(declared)
    elif isinstance(declared, list):
        types.update(declared)
    for value in node.get("enum", []) + ([node["const"]] if "const" in node else []):
        types.add(_json_type(value))
    for option in node.get("oneOf", []) + node.get("anyOf", []):
        types |= schema_types(option)
    return types


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, dict) else "array"


def fill_defaults(value: object, node: dict[str, Any]) -> object:
    """Return ``value`` with every missing property that has a schema default filled in."""
    if not isinstance(value, dict) or "properties" not in node:
        return value
    out = dict(value)
    for key, prop in node["properties"].items():
        if key not in out and "default" in prop:
            out[key] = json.loads(json.dumps(prop["default"]))
        if key in out:
            out[key] = fill_defaults(out[key], prop)
    return out
