"""Every recipe shipped in the repository validates (recursively, any folder depth)."""

from pathlib import Path

import pytest

from model_optimizer.fleet import is_fleet_file, load_fleet
from model_optimizer.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[3]
#: folders of YAML files that are not recipes: lm-evaluation-harness task definitions
NOT_RECIPES = ("lm_eval",)
ALL_SHIPPED = sorted(p for folder in ("recipes", "examples")
                     for p in (ROOT / folder).rglob("*.y*ml")
                     if not set(p.relative_to(ROOT).parts) & set(NOT_RECIPES))
#: fleets (``kind: fleet``) name member recipes; they are checked by ``load_fleet``
FLEETS = [p for p in ALL_SHIPPED if is_fleet_file(p)]
SHIPPED = [p for p in ALL_SHIPPED if p not in FLEETS]
LM_EVAL_TASKS = sorted(p for p in (ROOT / "examples").rglob("*.y*ml")
                       if "lm_eval" in p.relative_to(ROOT).parts)


def test_there_are_shipped_recipes():
    names = {p.name for p in SHIPPED}
    assert {"tiny-cpu.yaml", "7b-int4-a10.yaml", "tiny-trained-cpu.yaml"} <= names


@pytest.mark.parametrize("path", LM_EVAL_TASKS, ids=lambda p: p.name)
def test_shipped_lm_eval_tasks_are_lm_eval_tasks(path):
    import yaml

    task = yaml.safe_load(path.read_text())
    assert {"task", "dataset_path", "output_type", "doc_to_text"} <= set(task)
    assert "recipe_version" not in task


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_recipe_validates(path):
    loaded = load_recipe(path)
    assert loaded.resolved["recipe_version"] == 1
    first_line = path.read_text().splitlines()[0]
    assert first_line.startswith("# yaml-language-server: $schema=")
    schema_ref = first_line.split("$schema=", 1)[1]
    assert (path.parent / schema_ref).resolve() == ROOT / "schemas" / "recipe.v1.json"


@pytest.mark.parametrize("path", FLEETS, ids=lambda p: str(p.relative_to(ROOT)))
def test_shipped_fleet_validates(path):
    fleet = load_fleet(path)
    assert fleet.resolved["fleet_version"] == 1 and "fleet" in path.name
    schema_ref = path.read_text().splitlines()[0].split("$schema=", 1)[1]
    assert (path.parent / schema_ref).resolve() == ROOT / "schemas" / "fleet.v1.json"


def test_there_is_a_shipped_fleet():
    assert [p.name for p in FLEETS] == ["tiny-cpu-fleet.yaml"]
