"""The fleet's JSON Schema (``schemas/fleet.v1.json``), with its references to the recipe
schema's sections resolved, so one validator checks a whole fleet file.

The file refers to a recipe's sections (``recipe.v1.json#/properties/workload``) rather than
copying them: a knob added to recipes is a knob of inline instances too, and editors that
follow the reference check both the same way.
"""

from __future__ import annotations

import json
from functools import cache

from model_optimizer.recipe.schema import fill_defaults, recipe_schema, schemas_dir

FLEET_VERSION = 1
KIND = "fleet"
_RECIPE_REF = "recipe.v{version}.json#/properties/"


@cache
def fleet_schema(version: int = FLEET_VERSION) -> dict:
    """The fleet schema of format ``version``, references into the recipe schema inlined."""
    raw = json.loads((schemas_dir() / f"fleet.v{version}.json").read_text())
    return _inline(raw, recipe_schema())


def _inline(node: object, recipe: dict) -> object:
    """``node`` with each ``{"$ref": "recipe.v1.json#/properties/X", ...}`` replaced by the
    recipe schema's section X (the referring node's own description kept)."""
    if isinstance(node, list):
        return [_inline(item, recipe) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    prefix = _RECIPE_REF.format(version=1)
    if isinstance(ref, str) and ref.startswith(prefix):
        section = json.loads(json.dumps(recipe["properties"][ref.removeprefix(prefix)]))
        rest = {key: value for key, value in node.items() if key != "$ref"}
        return {**section, **rest}
    return {key: _inline(value, recipe) for key, value in node.items()}


def fill_fleet_defaults(document: dict) -> dict:
    """``document`` with the fleet schema's defaults filled in (instances and routes too)."""
    schema = fleet_schema()
    resolved = fill_defaults(document, schema)
    instances = resolved.get("instances")
    if isinstance(instances, dict):
        item = schema["properties"]["instances"]["additionalProperties"]
        # an instance's own keys only: inline model and engine stay as written (the member
        # recipe fills them), so an instance given as a recipe gains no engine section
        shallow = {**item, "properties": {key: {k: v for k, v in prop.items() if k != "properties"}
                                          for key, prop in item["properties"].items()}}
        resolved["instances"] = {name: _own_defaults(value, shallow)
                                 for name, value in instances.items()}
    return resolved


def _own_defaults(value: object, node: dict) -> object:
    if not isinstance(value, dict):
        return value
    out = dict(value)
    for key, prop in node["properties"].items():
        if key not in out and "default" in prop and key not in ("model", "engine"):
            out[key] = json.loads(json.dumps(prop["default"]))
    return out
