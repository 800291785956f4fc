"""Exports against hostile recipes (issue 37): control characters, secret references, `$`,
system folders, unvalidated recipes and unpinned hub models."""

from __future__ import annotations

import pytest
import yaml

from model_optimizer.export import ExportError, ExportOptions, build_deployment, export_recipe
from model_optimizer.recipe import RecipeSpec, load_recipe
from model_optimizer.recipe.render import engine_options
from tests.unit.export.conftest import write_recipe


def bypassed(loaded, section: str, key: str, value):
    """``loaded`` with a value its validation would have refused (a recipe checked by an
    older mopt, or a library caller): the export must hold on its own."""
    loaded.resolved.setdefault(section, {})[key] = value
    loaded.spec = RecipeSpec.of(loaded.resolved)
    return loaded


@pytest.mark.parametrize(("section", "key"), [("model", "revision"), ("validated", "hardware"),
                                              ("validated", "run_id")])
def test_a_newline_that_bypassed_validation_is_refused_by_the_export(tmp_path, model_dir,
                                                                     section, key):
    loaded = load_recipe(write_recipe(tmp_path, model_dir))
    if section == "validated":
        loaded.resolved["validated"] = {"at": "2026-01-01T00:00:00Z", "run_id": "r1"}
    bypassed(loaded, section, key, "main\n[Service]\nExecStartPre=/opt/evil/payload --run")
    with pytest.raises(ExportError, match=rf"{section}\.{key} holds the control character"):
        export_recipe(loaded, tmp_path / "out", tmp_path / "runs", ExportOptions(("systemd",)))
    assert not (tmp_path / "out").exists()


def test_a_recipe_file_name_with_newlines_cannot_add_options(tmp_path, model_dir):
    name = "tiny\nworker-extension-cls: evil.Ext\nx: .yaml"
    loaded = load_recipe(write_recipe(tmp_path, model_dir, name=name))
    out = export_recipe(loaded, tmp_path / "out", tmp_path / "runs",
                        ExportOptions(("vllm", "compose", "kubernetes", "systemd")))
    text = (out.folder / "vllm.yaml").read_text()
    assert yaml.safe_load(text) == dict(engine_options(loaded.spec, loaded.base_dir, 8000))
    assert "worker-extension-cls" not in yaml.safe_load(text)
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert len(header) == 2 and "tiny\\nworker-extension-cls: evil.Ext\\nx: .yaml" in header[0]


def test_the_systemd_unit_takes_percent_dollar_and_backslash_literally(tmp_path, model_dir):
    loaded = load_recipe(write_recipe(tmp_path, model_dir))
    folder = tmp_path / "out%h$HOME\\n"
    out = export_recipe(loaded, folder, tmp_path / "runs", ExportOptions(("systemd",)))
    unit = (out.folder / "mopt-tiny-export.service").read_text()
    escaped = str(tmp_path).replace("%", "%%") + "/out%%h$HOME\\\\n"
    assert f"WorkingDirectory={escaped}\n" in unit
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert f"'{str(tmp_path)}/out%%h$$HOME\\\\n/vllm.yaml'" in exec_start
    assert build_deployment(loaded).labels["mopt.recipe"] == "tiny-export"
