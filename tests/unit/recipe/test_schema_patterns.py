"""Schema patterns read as JSON Schema (ECMA 262) reads them: ``$`` is the very end."""

from __future__ import annotations

import pytest

from model_optimizer.recipe import validate
from model_optimizer.recipe.schema import recipe_schema
from model_optimizer.recipe.validate import schema_diagnostics
from model_optimizer.recipe.yamlsource import SourceMap
from model_optimizer.secrets import contains_secret, is_reference


def patterns(node: object) -> set[str]:
    if isinstance(node, dict):
        found = {node["pattern"]} if isinstance(node.get("pattern"), str) else set()
        return found.union(*(patterns(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(patterns(v) for v in node))
    return set()


SAMPLES = {"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$": "tiny", "^[0-9a-f]{64}$": "a" * 64,
           "^[A-Za-z_][A-Za-z0-9_]*$": "HF_TOKEN", "^[A-Za-z0-9_.-]{1,64}$": "short",
           "^[A-Za-z0-9][A-Za-z0-9._-]{0,31}$": "w4a16",
           "^[0-9A-Za-z._+-]+$": "580.159.04", "^[0-9a-f]{40}$": "b" * 40,
           "^[0-9]+(\\.[0-9]+)?x$": "2.5x"}


def test_every_schema_pattern_refuses_a_final_newline():
    found = patterns(recipe_schema())
    assert found == set(SAMPLES), "a new pattern: add a sample that matches it"
    for pattern, sample in SAMPLES.items():
        assert validate.ecma_pattern(pattern).search(sample), pattern
        assert not validate.ecma_pattern(pattern).search(sample + "\n"), pattern


@pytest.mark.parametrize(("doc", "path"), [
    ({"recipe_version": 1, "name": "tiny\n", "model": {"path": "m"}}, "name"),
    ({"recipe_version": 1, "name": "tiny", "model": {"path": "m"},
      "workload": {"api_key_env": "KEY\n"}}, "workload.api_key_env"),
    ({"recipe_version": 1, "name": "tiny", "model": {"path": "m"},
      "engine": {"env": {"A\n": "1"}}}, "engine.env.A\n"),
])
def test_a_final_newline_fails_the_schema(doc, path):
    assert path in [d.path for d in schema_diagnostics(doc, SourceMap("r.yaml"))]


def test_a_reference_with_a_final_newline_is_no_reference():
    """It stays a value that needs its secret, so the secret rule still sees it."""
    assert is_reference("${HF_TOKEN}") and not is_reference("${HF_TOKEN}\n")
    assert contains_secret("api-key", "${HF_TOKEN}\n")


def test_dollar_inside_a_class_or_escaped_is_a_character():
    assert validate.ecma_pattern(r"^a[$]b\$$").search("a$b$")
    assert not validate.ecma_pattern(r"^a[$]b\$$").search("a$b$\n")
