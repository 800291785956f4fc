"""A tag PyYAML's safe constructor accepts but cannot build is a located usage error."""

import pytest
from typer.testing import CliRunner

from model_optimizer.cli.main import app

HEADER = "recipe_version: 1\nname: x\nmodel: {path: m}\n"


@pytest.mark.parametrize("value", ["!!timestamp 0", "!!timestamp 2026-13-99", '!!int ""',
                                   '!!float ""'])
def test_unbuildable_tagged_values_exit_2_naming_the_file(tmp_path, value):
    path = tmp_path / "r.yaml"
    path.write_text(HEADER + f"engine: {value}\n")
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert f"{path}: a tagged value cannot be built" in result.output
    assert "drop the explicit YAML tag" in result.output
