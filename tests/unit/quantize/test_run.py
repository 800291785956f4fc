"""`mopt quantize` orchestration with a stand-in quantizer (the real one: tests/integration;
the stand-in and the ``project`` it quantizes: conftest.py)."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from model_optimizer.archive.manifest import verify_archive
from model_optimizer.cli.main import app
from model_optimizer.models.pins import checkpoint_hash
from model_optimizer.recipe import load_recipe

runner = CliRunner()


def _quantize(project, *extra):
    return runner.invoke(app, ["quantize", str(project / "recipes" / "r.yaml"), "--runs-dir",
                               str(project / "runs"), *extra])


def test_quantize_writes_checkpoint_pins_and_revision(project):
    result = _quantize(project, "--scheme", "w4a16")
    assert result.exit_code == 0, result.output
    assert "calibrating on 64" in result.output  # the built-in text, default count
    checkpoint = project / "models" / "m-w4a16"
    loaded = load_recipe(project / "recipes" / "r.yaml")
    model = loaded.resolved["model"]
    assert loaded.resolved["revision"] == 2
    assert model["path"] == "../models/m-w4a16"
    assert (model["quantization"], model["weight_bits"]) == ("compressed-tensors", 4)
    assert model["pins"]["sha256"] == checkpoint_hash(checkpoint).sha256
    assert model["pins"]["source"] == {"path": "../models/m", "revision": None,
                                       "sha256": checkpoint_hash(project / "models" / "m").sha256}
    assert model["pins"]["quantize"]["scheme"] == "w4a16" and model["pins"]["tool"] == "fake 1.0"
    [archive] = [p for p in (project / "runs").iterdir() if p.is_dir()]
    status = json.loads((archive / "status.json").read_text())
    assert (status["status"], status["kind"]) == ("ok", "quantize")
    for name in ("spec.json", "calibration.json", "quantize.log", "pins.json",
                 "recipe.written.yaml", "manifest.json"):
        assert (archive / name).is_file(), name
    assert not list((project / "models").glob(".*partial*"))
    assert verify_archive(archive) == []  # sealed after the last file was written


def test_a_second_quantize_starts_from_the_pinned_source(project):
    assert _quantize(project).exit_code == 0
    result = _quantize(project, "--scheme", "fp8_dynamic")
    assert result.exit_code == 0, result.output
    loaded = load_recipe(project / "recipes" / "r.yaml")
    assert loaded.resolved["model"]["path"] == "../models/m-fp8_dynamic"
    assert loaded.resolved["model"]["pins"]["source"]["path"] == "../models/m"
    assert loaded.resolved["revision"] == 3


def test_existing_output_needs_force(project):
    assert _quantize(project).exit_code == 0
    (project / "recipes" / "r.yaml").write_text(
        "recipe_version: 1\nname: r\nmodel:\n  path: ../models/m\n")
    again = _quantize(project)
    assert again.exit_code == 2 and "--force" in again.output
    assert _quantize(project, "--force").exit_code == 0


def test_a_failing_quantizer_is_exit_3_and_changes_nothing(project):
    before = (project / "recipes" / "r.yaml").read_text()
    result = _quantize(project, "--scheme", "w8a8")
    assert result.exit_code == 3
    assert "boom: out of memory" in result.output
    assert (project / "recipes" / "r.yaml").read_text() == before
    assert not (project / "models" / "m-w8a8").exists()
    [archive] = [p for p in (project / "runs").iterdir() if p.is_dir()]
    assert json.loads((archive / "status.json").read_text())["status"].startswith("failed")


def test_missing_environment_names_the_setup_script(project, monkeypatch):
    monkeypatch.setenv("MOPT_QUANT_PYTHON", str(project / "nope"))
    result = _quantize(project)
    assert result.exit_code == 2 and "setup-quant.sh" in result.output


def test_validate_and_plan_see_the_pins(project):
    assert _quantize(project).exit_code == 0
    recipe = str(project / "recipes" / "r.yaml")
    assert runner.invoke(app, ["validate", recipe, "--strict"]).exit_code == 0
    (project / "models" / "m-w4a16" / "model.safetensors").write_bytes(b"\x09" * 32)
    warned = runner.invoke(app, ["validate", recipe])
    assert warned.exit_code == 0 and "model.safetensors changed" in warned.output
    assert runner.invoke(app, ["validate", recipe, "--strict"]).exit_code == 2


def test_plan_marks_gpu_only_schemes(project):
    recipe = project / "recipes" / "r.yaml"
    text = yaml.safe_load(recipe.read_text())
    text["model"]["pins"] = {"quantize": {"scheme": "nvfp4"}}
    recipe.write_text(yaml.safe_dump(text))
    (project / "models" / "m" / "config.json").write_text(json.dumps(
        {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 2, "vocab_size": 100}))
    result = runner.invoke(app, ["plan", str(recipe)])
    assert result.exit_code == 1 and "quantize.scheme nvfp4 is GPU-only" in result.output
