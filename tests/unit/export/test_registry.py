"""Export formats are registered classes (``export/formats.py``): the registry is the one
list of names that the option check and the CLI help read, and adding a format is adding
a class."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.export import FORMATS, ExportError, ExportOptions, export_recipe
from model_optimizer.export import formats as registry
from model_optimizer.export.formats import ExportFormat, Rendering, format_names, register
from model_optimizer.export.run import check_options
from model_optimizer.recipe import load_recipe
from tests.unit.export.conftest import write_recipe


def test_the_registered_formats_in_order():
    assert format_names() == FORMATS == ("vllm", "compose", "kubernetes", "systemd")
    assert [registry.resolve(name).name for name in FORMATS] == list(FORMATS)


def test_the_option_check_and_the_cli_help_read_the_registry():
    for name in FORMATS:
        check_options(ExportOptions((name,), verify_schedule="off"))
    with pytest.raises(ExportError, match="choose from vllm, compose, kubernetes, systemd"):
        check_options(ExportOptions(("helm",)))
    help_text = " ".join(CliRunner().invoke(app, ["export", "--help"],
                                            env={"COLUMNS": "200"}).output.split())
    assert f"One of {', '.join(FORMATS)}" in help_text


def test_a_format_is_registered_once():
    class Twin(ExportFormat):
        name, order = "compose", 9

    with pytest.raises(ValueError, match="registered twice"):
        register(Twin)


def test_adding_a_format_is_adding_a_class(tmp_path, model_dir, monkeypatch):
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))

    @register
    class Notes(ExportFormat):
        name, order = "notes", 9

        def render(self, given: Rendering) -> dict[str, str]:
            return {"NOTES.txt": f"{given.dep.name} on port {given.dep.port}\n"}

    loaded = load_recipe(write_recipe(tmp_path, model_dir))
    outcome = export_recipe(loaded, tmp_path / "out", tmp_path / "runs",
                            ExportOptions(("notes",), port=8100, verify_schedule="off"))
    assert (tmp_path / "out" / "NOTES.txt").read_text() == "mopt-tiny-export on port 8100\n"
    assert "serve.sh" in outcome.files and "docker-compose.yaml" not in outcome.files
