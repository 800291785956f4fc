"""Every validated revision pins the checkpoint it was measured on, quantized or not, hashing
each checkpoint once per process; an ungated output change is marked in bold."""

from __future__ import annotations

import json

import pytest
import yaml

from model_optimizer.archive import RunArchive
from model_optimizer.history.drift import DriftError, check_drift, pinned_checkpoint_messages
from model_optimizer.models import pins as pins_module
from model_optimizer.models.pins import checkpoint_hash
from model_optimizer.recipe import load_recipe
from model_optimizer.search.core.revision import write_validated_revision


@pytest.fixture
def recipe(tmp_path):
    model = tmp_path / "models" / "m"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps({"hidden_size": 64}))
    (model / "model.safetensors").write_bytes(b"\x00" * 64)
    (model / "tokenizer.json").write_text("{}")  # not hashed: a tokenizer is not the model
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({
        "recipe_version": 1, "name": "r", "model": {"path": "models/m"},
        "engine": {"block_size": 32, "max_num_seqs": 4},
        "hardware": {"accelerator": "cpu", "memory_gib": 4}}))
    return path


def _write(path, changes, tmp_path):
    loaded = load_recipe(path)
    archive = RunArchive.create(tmp_path / "runs", "r", kind="sweep")
    write_validated_revision(archive, loaded, changes, {"qps": 3.0}, by="sweep", output=path)
    archive.close()
    return load_recipe(path)


def test_an_unquantized_revision_is_pinned_once_per_checkpoint(recipe, tmp_path, monkeypatch):
    hashed = []
    real = pins_module.file_sha256
    monkeypatch.setattr(pins_module, "file_sha256", lambda p: hashed.append(p.name) or real(p))
    monkeypatch.setattr(pins_module, "_CACHE", {})
    written = _write(recipe, {("engine", "max_num_seqs"): 8}, tmp_path)
    pins = written.resolved["model"]["pins"]
    folder = tmp_path / "models" / "m"
    assert sorted(hashed) == ["config.json", "model.safetensors"]
    assert pins["sha256"] == checkpoint_hash(folder).sha256
    assert pins["source"] == {"path": "models/m", "revision": None, "sha256": pins["sha256"]}
    assert "quality" not in written.resolved["validated"]  # max_num_seqs changes no answer
    again = _write(recipe, {("engine", "max_num_seqs"): 16}, tmp_path)  # same checkpoint
    assert sorted(hashed) == ["config.json", "model.safetensors"]  # read once, not again
    assert again.resolved["model"]["pins"] == pins
    assert pinned_checkpoint_messages(again.resolved, again.base_dir) == []
    with (folder / "model.safetensors").open("r+b") as handle:
        handle.seek(-8, 2)
        handle.write(b"\x01")
    with pytest.raises(DriftError, match="model.safetensors changed"):
        check_drift(again.resolved, strict=True, base_dir=again.base_dir)


def test_an_ungated_output_change_is_marked_in_bold(recipe, tmp_path):
    written = _write(recipe, {("engine", "kv_cache_dtype"): "fp8"}, tmp_path)
    quality = written.resolved["validated"]["quality"]
    assert quality["gated"] is False and quality["passed"] is None
    assert quality["reasons"][0].startswith("**NOT QUALITY-GATED**: engine.kv_cache_dtype "
                                            "changed without a quality gate")
