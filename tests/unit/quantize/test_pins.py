"""Checkpoint pins: the hash covers weights and config, and names what changed."""

from __future__ import annotations

import json

import pytest

from model_optimizer.history.drift import check_drift, pinned_checkpoint_messages
from model_optimizer.models.pins import checkpoint_hash, pin_messages


def _checkpoint(folder):
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"hidden_size": 8}))
    (folder / "model.safetensors").write_bytes(b"\x00" * 64)
    (folder / "tokenizer.json").write_text("{}")
    return folder


def _pins(folder):
    digest = checkpoint_hash(folder)
    return {"sha256": digest.sha256, "files": digest.files}


def test_hash_covers_weights_and_config_not_the_tokenizer(tmp_path):
    folder = _checkpoint(tmp_path / "m")
    before = checkpoint_hash(folder)
    assert sorted(before.files) == ["config.json", "model.safetensors"]
    (folder / "tokenizer.json").write_text('{"changed": true}')
    assert checkpoint_hash(folder) == before
    (folder / "model.safetensors").write_bytes(b"\x01" + b"\x00" * 63)
    assert checkpoint_hash(folder).sha256 != before.sha256


def test_a_renamed_file_changes_the_hash(tmp_path):
    folder = _checkpoint(tmp_path / "m")
    before = checkpoint_hash(folder).sha256
    (folder / "model.safetensors").rename(folder / "model-00001.safetensors")
    assert checkpoint_hash(folder).sha256 != before


def test_a_folder_without_weights_is_refused(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="no weight files"):
        checkpoint_hash(tmp_path)


def test_messages_name_each_changed_added_and_missing_file(tmp_path):
    folder = _checkpoint(tmp_path / "m")
    pins = _pins(folder)
    assert pin_messages(pins, folder) == []
    (folder / "model.safetensors").write_bytes(b"\x02" * 64)
    (folder / "config.json").unlink()
    (folder / "extra.bin").write_bytes(b"x")
    [message] = pin_messages(pins, folder)
    assert "model.safetensors changed" in message
    assert "config.json is missing" in message and "extra.bin was added" in message
    assert pin_messages(pins, tmp_path / "gone")[0].startswith("model folder")


def test_drift_check_reads_pins_relative_to_the_recipe(tmp_path):
    folder = _checkpoint(tmp_path / "models" / "m")
    resolved = {"name": "r", "revision": 2,
                "model": {"path": "../models/m", "pins": _pins(folder)}}
    base = tmp_path / "recipes"
    assert pinned_checkpoint_messages(resolved, base) == []
    (folder / "model.safetensors").write_bytes(b"\x03" * 64)
    assert check_drift(resolved, base_dir=base)[0].startswith("checkpoint ")
    with pytest.raises(Exception, match="Refusing to run with --strict"):
        check_drift(resolved, strict=True, base_dir=base)
    # without base_dir (callers that do not know the recipe's folder) pins are not checked
    assert check_drift(resolved) == []
