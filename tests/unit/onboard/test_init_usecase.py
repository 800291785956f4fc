"""``usecase.init`` (what `mopt init` and `mopt optimize MODEL_DIR` call) from Python: the
recipe written for the hardware named, what it returns; its refusals write nothing."""

from __future__ import annotations

import pytest

from model_optimizer.errors import UsageError
from model_optimizer.recipe import load_recipe
from model_optimizer.usecase import init

from .test_init import TINY, _model


def test_a_recipe_written_for_the_hardware_named(tmp_path):
    model_dir = _model(tmp_path, TINY)
    out = tmp_path / "recipes" / "r.yaml"
    result = init(model_dir, output=out, accelerator="CPU", memory_gib=4, prompt_tokens=64,
                  output_tokens=32)
    assert result.exit_code == 0 and result.recipe == out and result.warnings == []
    assert (result.hardware.accelerator, result.hardware.memory_gib) == ("cpu", 4)
    loaded = load_recipe(out)
    assert loaded.name == result.name == "my-model"
    assert loaded.resolved["hardware"]["memory_gib"] == 4.0
    assert (loaded.resolved["workload"]["prompt_tokens"],
            loaded.resolved["workload"]["output_tokens"]) == (64, 32)
    assert result.to_dict()["recipe"] == str(out) and result.to_dict()["plan"] == result.plan


def test_refusals_write_nothing(tmp_path):
    model_dir = _model(tmp_path, TINY)
    out = tmp_path / "recipes" / "r.yaml"
    with pytest.raises(UsageError, match="not a folder"):
        init(tmp_path / "nope", output=out)
    with pytest.raises(UsageError, match="unknown"):
        init(model_dir, output=out, accelerator="TPU")
    assert not out.parent.exists()
    out.parent.mkdir()
    out.write_text("mine")
    with pytest.raises(UsageError, match="exists; pass --force") as exists:
        init(model_dir, output=out)
    assert exists.value.exit_code == 2 and out.read_text() == "mine"
    assert init(model_dir, output=out, accelerator="cpu", force=True).recipe == out
    assert out.read_text() != "mine"
