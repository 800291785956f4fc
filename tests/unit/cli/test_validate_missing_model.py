"""Issue 37: `mopt validate` said ok for a local model.path that does not exist. A fresh
checkout validates its recipes before `mopt tiny-model` builds their model (docs/commands.md
`mopt validate recipes/*.yaml`), so it stays allowed: a warning at file:line:column naming
what builds the folder; --strict refuses it (exit 2)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.errors import EXIT_USAGE

RECIPE = """recipe_version: 1
name: r
model:
  path: {path}
hardware: {{accelerator: cpu, memory_gib: 2}}
"""


def validate(tmp_path, path: str, *flags: str):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.format(path=path))
    return CliRunner().invoke(app, ["validate", str(recipe), *flags])


@pytest.mark.parametrize(("path", "fix"), [
    ("./models/tiny-llama", "build it: mopt tiny-model "),
    ("../models/tiny-llama-trained", "build it: mopt tiny-model --trained "),
    ("/nonexistent/model", "download or build the model there, or fix model.path")])
def test_a_missing_local_model_folder_is_a_located_warning_with_its_fix(tmp_path, path, fix):
    result = validate(tmp_path, path)
    assert result.exit_code == 0, result.output
    assert f"r.yaml:4:9: model.path: '{path}' resolves to" in result.stderr
    assert "which does not exist" in result.stderr and fix in result.stderr
    assert validate(tmp_path, path, "--strict").exit_code == EXIT_USAGE
    report = json.loads(validate(tmp_path, path, "--json").stdout)
    assert report["recipes"][0]["warnings"][0]["path"] == "model.path"


def test_an_existing_folder_and_a_hub_id_give_no_warning(tmp_path):
    (tmp_path / "models" / "m").mkdir(parents=True)
    for path in ("./models/m", "some-org/some-model"):
        result = validate(tmp_path, path, "--strict")
        assert result.exit_code == 0 and "does not exist" not in result.stderr, result.output
