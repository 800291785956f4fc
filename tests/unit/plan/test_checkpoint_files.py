"""Weights from a model folder's safetensors headers (no tensor loaded)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

from model_optimizer.plan import estimate, load_model_config
from model_optimizer.plan.checkpoint_files import read_checkpoint

from .conftest import DATA


def _write(path: Path, tensors: dict[str, tuple[str, list[int], int]]) -> None:
    """A safetensors file: 8-byte header length, JSON header, then the tensor bytes."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, (dtype, shape, size) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)


def test_headers_give_bytes_and_elements(tmp_path):
    _write(tmp_path / "model-00001-of-00002.safetensors", {"a": ("F32", [4, 8], 128)})
    # a packed int4 weight: 16 x 8 elements stored as 16 x 1 int32 words
    _write(tmp_path / "model-00002-of-00002.safetensors", {"q": ("I32", [16, 1], 64),
                                                           "s": ("F16", [16], 32)})
    found = read_checkpoint(tmp_path)
    assert (found.weight_bytes, found.stored_elements) == (128 + 64 + 32, 32 + 16 + 16)
    assert found.source == "safetensors headers of 2 file(s)"


def test_the_index_alone_gives_the_total_size(tmp_path):
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({
        "metadata": {"total_size": 14_483_464_192},
        "weight_map": {"w": "model-00001-of-00002.safetensors"}}))
    found = read_checkpoint(tmp_path)
    assert (found.weight_bytes, found.stored_elements) == (14_483_464_192, None)


def test_no_weights_or_a_damaged_header_gives_none(tmp_path):
    assert read_checkpoint(tmp_path) is None
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", 10**12) + b"{}")
    assert read_checkpoint(tmp_path) is None


def test_unquantized_weights_are_served_in_the_dtype(make_recipe, tmp_path):
    config = load_model_config(DATA / "llama-2-7b")
    # a float32 checkpoint of 1,000 elements: served as 2,000 bytes in float16
    _write(tmp_path / "model.safetensors", {"w": ("F32", [10, 100], 4000)})
    report = estimate(make_recipe({"hardware.accelerator": "A10"}), config,
                      read_checkpoint(tmp_path))
    assert report.weight_bytes == 2000
    assert "weights from safetensors headers" in report.param_source


def test_quantized_weights_are_the_bytes_on_disk(make_recipe, tmp_path):
    config = load_model_config(DATA / "configs" / "gpt-oss-20b.json")
    _write(tmp_path / "model.safetensors", {"w": ("U8", [1000], 1000)})
    report = estimate(make_recipe({"hardware.accelerator": "H200"}), config,
                      read_checkpoint(tmp_path))
    assert report.weight_bytes == 1000
    assert any("1,000 bytes in safetensors headers" in n for n in report.notes)
