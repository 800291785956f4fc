"""A project to quantize with the stand-in quantizer of ``stand_in.py`` (the real one:
tests/integration), given as $MOPT_QUANT_PYTHON."""

from __future__ import annotations

import json
import sys

import pytest

from .stand_in import FAKE


@pytest.fixture
def project(tmp_path, monkeypatch):
    model = tmp_path / "models" / "m"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"hidden_size": 8}))
    (model / "model.safetensors").write_bytes(b"\x00" * 32)
    recipes = tmp_path / "recipes"
    recipes.mkdir()
    recipe = recipes / "r.yaml"
    recipe.write_text("recipe_version: 1\nname: r\nmodel:\n  path: ../models/m  # the model\n"
                      "hardware:\n  accelerator: cpu\n")
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!{sys.executable}\n" + FAKE)
    fake.chmod(0o755)
    monkeypatch.setenv("MOPT_QUANT_PYTHON", str(fake))
    return tmp_path
