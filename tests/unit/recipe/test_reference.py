"""The recipe reference page (docs/reference.md) stays in step with the schema."""

from pathlib import Path

from model_optimizer.recipe.reference import END, START, render_reference
from model_optimizer.recipe.schema import recipe_schema

REFERENCE_PAGE = Path(__file__).resolve().parents[3] / "docs" / "reference.md"


def _all_paths(node, prefix=""):
    for key, child in node.get("properties", {}).items():
        if key == "$schema":
            continue
        yield prefix + key
        yield from _all_paths(child, f"{prefix}{key}.")


def test_reference_page_matches_the_schema():
    text = REFERENCE_PAGE.read_text()
    block = text[text.index(START): text.index(END) + len(END)]
    assert block == render_reference(), (
        "docs/reference.md is stale: run "
        "`python -m model_optimizer.recipe.reference --write docs/reference.md`")


def test_reference_lists_every_key_with_a_description():
    reference = render_reference()
    for path in _all_paths(recipe_schema()):
        assert f"| `{path}`" in reference
    for line in reference.splitlines():
        if line.startswith("| `"):
            assert line.rstrip(" |").split("|")[-1].strip(), f"no description: {line}"
