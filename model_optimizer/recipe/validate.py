"""Schema validation of a recipe document, with located, human-worded diagnostics."""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from typing import Any

import jsonschema

from model_optimizer.errors import Diagnostic
from model_optimizer.plan import accelerators
from model_optimizer.recipe.schema import recipe_schema
from model_optimizer.recipe.yamlsource import Path_, SourceMap

_TYPE_WORDS = {
    "integer": "a whole number", "number": "a number", "string": "a string",
    "boolean": "true or false", "object": "a mapping (key: value lines)",
    "array": "a list", "null": "null",
}


#: where a recipe names its accelerator
ACCELERATOR_PATH = ("hardware", "accelerator")


def canonical_names(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` with ``hardware.accelerator`` in the table's spelling when it names a row in
    another case or by an alias (``h100``, ``mi300x``, ``A100-80G``): the planner's one rule
    of accelerator names (``plan.accelerators.known_accelerator``), so ``validate``,
    ``init`` and ``plan`` accept the same names. Anything else is left for the schema."""
    hardware = doc.get("hardware")
    if not isinstance(hardware, dict):
        return doc
    name = hardware.get("accelerator")
    known = accelerators.known_accelerator(name) if isinstance(name, str) else None
    if known is None or known == name:
        return doc
    return {**doc, "hardware": {**hardware, "accelerator": known}}


def did_you_mean(word: object, choices: Iterable[object]) -> str | None:
    """``did you mean 'x'?`` for the closest choice, if any is close."""
    names = [str(c) for c in choices]
    match = difflib.get_close_matches(str(word), names, n=1, cutoff=0.6)
    return f"did you mean '{match[0]}'?" if match else None


def _describe(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _expected_types(types: str | list[str]) -> str:
    names = [types] if isinstance(types, str) else list(types)
    return " or ".join(_TYPE_WORDS.get(n, n) for n in names)


def _unknown_keys(error: jsonschema.ValidationError, smap: SourceMap) -> list[Diagnostic]:
    path = tuple(error.absolute_path)
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    allowed = list(schema.get("properties", {}))
    instance: Any = error.instance  # a mapping: additionalProperties reports on mappings
    out = []
    for key in instance:
        if key in allowed:
            continue
        hint = did_you_mean(key, allowed) or f"allowed keys: {', '.join(allowed)}"
        where = ".".join(map(str, path)) or "the top level"
        out.append(smap.diagnostic((*path, key), f"unknown key '{key}' in {where}", hint,
                                   prefer_key=True))
    return out


def _one_error(error: jsonschema.ValidationError, smap: SourceMap) -> list[Diagnostic]:
    """Translate one jsonschema error into diagnostics."""
    path = tuple(error.absolute_path)
    kind, value = error.validator, error.instance
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    expected: Any = error.validator_value  # the keyword's value in the schema: any JSON
    if "propertyNames" in error.absolute_schema_path and isinstance(value, str):
        path += (value,)  # a bad key: located at the key itself (a --set, or its line)
    if kind == "additionalProperties":
        return _unknown_keys(error, smap)
    if kind == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        desc = schema.get("properties", {}).get(missing, {}).get("description", "")
        return [smap.diagnostic(path, f"missing required key '{missing}'", desc or None,
                                prefer_key=True)]
    if kind == "type":
        message = f"expected {_expected_types(expected)}, got {_describe(value)}"
    elif kind == "enum":
        choices = expected
        hint = (accelerators.did_you_mean(value) if path == ACCELERATOR_PATH
                else did_you_mean(value, choices))
        listed = ", ".join(str(c) for c in choices)
        return [smap.diagnostic(path, f"{_describe(value)} is not one of: {listed}", hint)]
    elif kind == "const":
        message = f"must be {expected!r}, got {_describe(value)}"
    elif kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        word = {"minimum": ">=", "maximum": "<=", "exclusiveMinimum": ">",
                "exclusiveMaximum": "<"}[kind]
        message = f"must be {word} {expected}, got {_describe(value)}"
    elif kind in ("minLength", "minItems"):
        message = f"must not be empty, got {_describe(value)}"
    elif kind == "pattern":
        message = f"{_describe(value)} has characters that are not allowed"
    elif kind == "propertyNames":
        message = f"{_describe(value)} is not an allowed name"
    elif kind in ("oneOf", "anyOf"):
        message = f"{_describe(value)} is not allowed here"
    else:
        message = error.message
    return [smap.diagnostic(path, message, schema.get("description"),
                            prefer_key="propertyNames" in error.absolute_schema_path)]


@cache
def ecma_pattern(pattern: str) -> re.Pattern[str]:
    """A JSON Schema ``pattern`` (ECMA 262) as Python reads it: ``$`` outside a character
    class matches only at the very end (``\\Z``); Python's ``$`` also matches before a final
    newline, which let ``name: "tiny\\n"`` through ``^[A-Za-z0-9._-]+$``."""
    out, in_class, escaped = [], False, False
    for char in pattern:
        if escaped:
            out.append(char)
            escaped = False
        elif char == "\\":
            out.append(char)
            escaped = True
        elif char == "$" and not in_class:
            out.append("\\Z")
        else:
            in_class = (in_class and char != "]") or (not in_class and char == "[")
            out.append(char)
    return re.compile("".join(out))


def _pattern(validator: jsonschema.protocols.Validator, pattern: str, instance: object,
             schema: dict[str, Any]) -> Iterator[jsonschema.ValidationError]:
    """The ``pattern`` keyword with ECMA's ``$`` (``ecma_pattern``)."""
    if isinstance(instance, str) and not ecma_pattern(pattern).search(instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


#: the recipe schema's validator: Draft 2020-12, patterns read as ECMA 262 reads them
# types-jsonschema leaves validators.extend unannotated
RecipeValidator = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    jsonschema.Draft202012Validator, {"pattern": _pattern})


def schema_diagnostics(doc: dict[str, Any], smap: SourceMap,
                       version: int | None = None) -> list[Diagnostic]:
    """Every schema violation of ``doc``, located through ``smap``."""
    schema = recipe_schema() if version is None else recipe_schema(version)
    return diagnostics_against(schema, doc, smap)


def diagnostics_against(schema: dict[str, Any], doc: dict[str, Any],
                        smap: SourceMap) -> list[Diagnostic]:
    """Every violation of ``schema`` by ``doc`` (a recipe, or a fleet: ``fleet/``), worded
    and located like a recipe's."""
    validator = RecipeValidator(schema)
    out: list[Diagnostic] = []
    for error in validator.iter_errors(doc):
        out.extend(_one_error(error, smap))
    return out + _non_finite(doc, smap)


#: where an infinite number means something (an unbounded arrival rate)
_INFINITE_OK = {("workload", "request_rate")}


def _non_finite(value: object, smap: SourceMap, path: Path_ = ()) -> list[Diagnostic]:
    """NaN anywhere, and infinity outside ``_INFINITE_OK``: JSON Schema lets both through."""
    if isinstance(value, dict):
        return [d for key, item in value.items() for d in _non_finite(item, smap, (*path, key))]
    if isinstance(value, list):
        return [d for i, item in enumerate(value) for d in _non_finite(item, smap, (*path, i))]
    if not isinstance(value, float) or math.isfinite(value):
        return []
    if math.isinf(value) and value > 0 and path in _INFINITE_OK:
        return []
    return [smap.diagnostic(path, f"{value!r} is not a usable number here",
                            "write a finite number")]
