"""Every recipe shipped in the repository validates (recursively, any folder depth)."""

from pathlib import Path

import pytest

from model_optimizer.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = sorted(p for folder in ("recipes", "examples")
                 for p in (ROOT / folder).rglob("*.y*ml"))


def test_there_are_shipped_recipes():
    names = {p.name for p in SHIPPED}
    assert {"tiny-cpu.yaml", "7b-int4-a10.yaml"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_recipe_validates(path):
    loaded = load_recipe(path)
    assert loaded.resolved["recipe_version"] == 1
    first_line = path.read_text().splitlines()[0]
    assert first_line.startswith("# yaml-language-server: $schema=")
    schema_ref = first_line.split("$schema=", 1)[1]
    assert (path.parent / schema_ref).resolve() == ROOT / "schemas" / "recipe.v1.json"
