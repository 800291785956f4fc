"""Weights as they are on disk: the bytes and tensor sizes of a model folder's safetensors
files, read from their headers only (no tensor is loaded, nothing is imported).

A safetensors file starts with an 8-byte little-endian header length and a JSON header
mapping each tensor name to its ``dtype``, ``shape`` and ``data_offsets`` (the format's
specification); the tensor bytes are the offsets' difference. When the shards are not all
present, ``model.safetensors.index.json``'s ``metadata.total_size`` gives the bytes alone.
Pre-quantized checkpoints are covered as they are: their packed weights and scales are the
bytes vLLM loads.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

MAX_HEADER_BYTES = 100 * 1024 * 1024  # the format's own limit on a header


@dataclass(frozen=True)
class CheckpointFiles:
    """Bytes of a folder's weights, and the elements stored (packed tensors count as stored)."""

    weight_bytes: int
    stored_elements: int | None  # None when only the index's total size was read
    source: str


def _header(path: Path) -> dict:
    with path.open("rb") as handle:
        raw = handle.read(8)
        if len(raw) != 8:
            raise ValueError(f"{path}: shorter than a safetensors header")
        (length,) = struct.unpack("<Q", raw)
        if length > MAX_HEADER_BYTES:
            raise ValueError(f"{path}: header of {length} bytes is past the format's limit")
        return json.loads(handle.read(length))


def read_checkpoint(folder: Path) -> CheckpointFiles | None:
    """The weights of ``folder`` from safetensors headers (or the index), None when it has
    none. A damaged file gives None as well: the plan then computes the bytes."""
    shards = sorted(folder.glob("*.safetensors"))
    index = folder / "model.safetensors.index.json"
    try:
        expected = set(json.loads(index.read_text())["weight_map"].values()) \
            if index.is_file() else None
        if shards and (expected is None or expected <= {s.name for s in shards}):
            total = elements = 0
            for shard in shards:
                for name, info in _header(shard).items():
                    if name == "__metadata__":
                        continue
                    start, end = info["data_offsets"]
                    total += end - start
                    count = 1
                    for dim in info["shape"]:
                        count *= dim
                    elements += count
            return CheckpointFiles(total, elements,
                                   f"safetensors headers of {len(shards)} file(s)")
        if index.is_file():
            size = json.loads(index.read_text())["metadata"]["total_size"]
            return CheckpointFiles(int(size), None, "model.safetensors.index.json total_size")
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return None
