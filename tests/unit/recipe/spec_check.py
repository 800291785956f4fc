"""Where the typed recipe view (``recipe/spec.py``) and the JSON Schema disagree.

``disagreements(RecipeSpec, schema)`` walks both together and names every mismatch by its
key path: a property with no field or a field with no property, a type, an enum (a
``Literal``), a required key or a default that differs, an open map or array whose element
differs, a closed object whose model accepts extra keys.
"""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import PydanticUndefined

from model_optimizer.recipe.schema import fill_defaults, schema_types

_PLAIN = {str: "string", int: "integer", float: "number", bool: "boolean",
          type(None): "null"}


def _members(annotation: Any) -> list[Any]:
    if get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for arg in get_args(annotation) for m in _members(arg)]
    return [annotation]


def _json_type(value: object) -> str:
    for kind, name in ((bool, "boolean"), (int, "integer"), (float, "number"), (str, "string")):
        if isinstance(value, kind):
            return name
    return "null" if value is None else "object"


def _normal(kinds: set[str]) -> set[str]:
    """JSON's number includes the integers: {integer, number} reads as {number}."""
    return kinds - {"integer"} if "number" in kinds else kinds


def annotation_types(annotation: Any) -> set[str]:
    """The JSON types a field's annotation admits."""
    kinds: set[str] = set()
    for member in _members(annotation):
        origin = get_origin(member)
        if origin is Literal:
            kinds |= {_json_type(v) for v in get_args(member)}
        elif member in _PLAIN:
            kinds.add(_PLAIN[member])
        elif origin is tuple:
            kinds.add("array")
        elif origin is dict or (isinstance(member, type) and issubclass(member, BaseModel)):
            kinds.add("object")
        else:
            kinds.add(f"unmapped {member!r}")
    return _normal(kinds)


def _literals(annotation: Any) -> set[tuple[str, object]]:
    return {(_json_type(v), v) for m in _members(annotation) if get_origin(m) is Literal
            for v in get_args(m)}


def _enum(node: dict) -> set[tuple[str, object]]:
    values = list(node.get("enum", [])) + ([node["const"]] if "const" in node else [])
    found = {(_json_type(v), v) for v in values}
    for option in node.get("oneOf", []) + node.get("anyOf", []):
        found |= _enum(option)
    return found


def _options(node: dict) -> list[dict]:
    return [node] + node.get("oneOf", []) + node.get("anyOf", [])


def check_value(annotation: Any, node: dict, path: str, problems: list[str],
                nullable: bool = False) -> None:
    """Types, enum, nested objects, map values and array items of one value."""
    want = _normal(schema_types(node) | ({"null"} if nullable else set()))
    have = annotation_types(annotation)
    if have != want:
        problems.append(f"{path}: type {sorted(have)} in the view, {sorted(want)} in the schema")
    literals, enum = _literals(annotation), _enum(node)
    if literals and literals != enum:
        problems.append(f"{path}: enum {sorted(map(str, literals))} in the view, "
                        f"{sorted(map(str, enum))} in the schema")
    if enum and not literals and have != {"string"}:
        problems.append(f"{path}: the schema's enum is neither a Literal nor plain str")
    members = _members(annotation)
    models = [m for m in members if isinstance(m, type) and issubclass(m, BaseModel)]
    closed = [o for o in _options(node) if "properties" in o]
    if len(models) != len(closed):
        problems.append(f"{path}: {len(models)} models in the view, {len(closed)} objects "
                        "with properties in the schema")
    for model, option in zip(models, closed, strict=False):
        check_model(model, option, path, problems)
    _check_containers(members, node, path, problems)


def _check_containers(members: list[Any], node: dict, path: str, problems: list[str]) -> None:
    maps = [get_args(m)[1] for m in members if get_origin(m) is dict]
    values = [o["additionalProperties"] for o in _options(node)
              if isinstance(o.get("additionalProperties"), dict)]
    if maps and values:
        check_value(maps[0], values[0], f"{path}.*", problems)
    elif maps and maps[0] is not Any:
        problems.append(f"{path}: a typed map in the view, an open object in the schema")
    elif values:
        problems.append(f"{path}: a typed map in the schema, not in the view")
    arrays = [get_args(m)[0] for m in members if get_origin(m) is tuple]
    items = [o["items"] for o in _options(node) if isinstance(o.get("items"), dict)]
    if arrays and items:
        check_value(arrays[0], items[0], f"{path}[]", problems)
    elif arrays or items:
        problems.append(f"{path}: array items typed on one side only")


def _default(field) -> object:
    if field.default_factory is not None:
        return field.default_factory()
    return field.default


def check_model(model: type[BaseModel], node: dict, path: str, problems: list[str]) -> None:
    """Properties vs fields, required keys, defaults, then every value."""
    fields = {(f.alias or name): f for name, f in model.model_fields.items()}
    props, required = node.get("properties", {}), set(node.get("required", []))
    where = path or "(root)"
    for key in sorted(set(props) - set(fields)):
        problems.append(f"{where}: schema property '{key}' has no field in {model.__name__}")
    for key in sorted(set(fields) - set(props)):
        problems.append(f"{where}: field '{key}' of {model.__name__} is not in the schema")
    if node.get("additionalProperties") is False and model.model_config.get("extra") != "forbid":
        problems.append(f"{where}: closed in the schema, {model.__name__} accepts extra keys")
    for key in sorted(set(props) & set(fields)):
        _check_field(fields[key], props[key], key in required, f"{path}.{key}".lstrip("."),
                     problems)


def _check_default(field, prop: dict, path: str, problems: list[str]) -> None:
    """The view's default equals the schema's, filled in and read into the field's type."""
    try:
        want = TypeAdapter(field.annotation).validate_python(
            fill_defaults(prop["default"], prop))
    except ValidationError as exc:
        problems.append(f"{path}: the schema's default does not fit the view: {exc}")
        return
    have = _default(field)
    if have != want or type(have) is not type(want):
        problems.append(f"{path}: default {have!r} in the view, {want!r} in the schema")


def _check_field(field, prop: dict, required: bool, path: str, problems: list[str]) -> None:
    absent = not required and "default" not in prop
    if required != field.is_required():
        problems.append(f"{path}: required {required} in the schema, {field.is_required()} "
                        "in the view")
    elif "default" in prop:
        _check_default(field, prop, path, problems)
    elif absent and (field.default is not None or field.default_factory is not None):
        problems.append(f"{path}: no default in the schema; the view's must be None (absent)")
    check_value(field.annotation, prop, path, problems, nullable=absent)
    if field.default is PydanticUndefined and field.default_factory is None and not required:
        problems.append(f"{path}: optional in the schema, required in the view")


def disagreements(model: type[BaseModel], schema: dict) -> list[str]:
    """Every mismatch between ``model`` and ``schema``, by key path (empty when in step)."""
    problems: list[str] = []
    check_model(model, schema, "", problems)
    return problems
