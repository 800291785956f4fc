"""Checkpoint pins: the SHA-256 of a model folder's weights and config, and drift from it.

Every validated recipe revision (`mopt quantize`, `optimize`, `sweep`, `tune`) pins, in
``model.pins``, the content of the checkpoint it was made and validated on, quantized or
not. The hash covers the files that decide what the model computes: weights
(``*.safetensors``, ``*.bin``, ``*.pt``, ``*.pth``, ``*.gguf``), ``config.json`` and
``generation_config.json``, plus the safetensors index.
Tokenizer files are left out (a re-saved tokenizer is not a new model). The folder hash is
the SHA-256 of the sorted lines ``<relative name>\\0<file sha256>\\n``, so a renamed, added,
removed or edited file each changes it, and the per-file hashes name what changed.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
CONFIG_FILES = ("config.json", "generation_config.json", "model.safetensors.index.json",
                "pytorch_model.bin.index.json")
CHUNK = 1 << 20
MAX_HASH_THREADS = 8  # shards of a large checkpoint are hashed in parallel, one per core


@dataclass(frozen=True)
class CheckpointHash:
    """A folder's content hash and the hash of each file in it."""

    sha256: str
    files: dict[str, str]


def _hashed_files(folder: Path) -> list[Path]:
    found = [path for path in folder.rglob("*") if path.is_file() and (
        path.name in CONFIG_FILES or path.suffix in WEIGHT_SUFFIXES)]
    return sorted(found, key=lambda path: path.relative_to(folder).as_posix())


def file_sha256(path: Path) -> str:
    """SHA-256 of one file, read in 1 MiB chunks (bounded memory)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


#: Hashes computed in this process, by folder and the (name, size, mtime) of its hashed
#: files: a search pins the same checkpoint several times (baseline, quantize source,
#: revision) and each is read once per run; any edit changes the size or mtime and is hashed.
_CACHE: dict[tuple, CheckpointHash] = {}


def _signature(root: Path, paths: list[Path]) -> tuple:
    stats = [(p.relative_to(root).as_posix(), p.stat()) for p in paths]
    return (str(root.resolve()),
            tuple((name, st.st_size, st.st_mtime_ns, st.st_ino) for name, st in stats))


def checkpoint_hash(folder: str | Path) -> CheckpointHash:
    """Hash a model folder's weights and config; ValueError when it holds none. Each
    checkpoint is read once per process while its files are unchanged (see ``_CACHE``)."""
    root = Path(folder)
    paths = _hashed_files(root)
    key = _signature(root, paths)
    if key in _CACHE:
        return _CACHE[key]
    workers = max(1, min(len(paths), os.cpu_count() or 1, MAX_HASH_THREADS))
    with ThreadPoolExecutor(max_workers=workers) as pool:  # hashlib releases the GIL
        digests = list(pool.map(file_sha256, paths))
    files = {path.relative_to(root).as_posix(): digest for path, digest in zip(paths, digests,
                                                                              strict=True)}
    if not any(name.endswith(WEIGHT_SUFFIXES) for name in files):
        raise ValueError(f"{root}: no weight files ({', '.join(WEIGHT_SUFFIXES)}) to hash")
    lines = "".join(f"{name}\0{digest}\n" for name, digest in sorted(files.items()))
    _CACHE[key] = CheckpointHash(hashlib.sha256(lines.encode()).hexdigest(), files)
    return _CACHE[key]


def served_pins(folder: Path, source_path: str, revision: str | None = None) -> dict:
    """The ``model.pins`` block of a revision serving ``folder`` as it is (not made by mopt
    from another model): its hash, per-file hashes, and itself as the source."""
    digest = checkpoint_hash(folder)
    return {"sha256": digest.sha256, "files": digest.files,
            "source": {"path": source_path, "revision": revision, "sha256": digest.sha256}}


def pin_differences(pinned: CheckpointHash, found: CheckpointHash) -> list[str]:
    """Each file that was changed, added or removed since ``pinned``, in words."""
    changes = []
    for name in sorted(set(pinned.files) | set(found.files)):
        before, after = pinned.files.get(name), found.files.get(name)
        if before == after:
            continue
        if before is None:
            changes.append(f"{name} was added")
        elif after is None:
            changes.append(f"{name} is missing")
        else:
            changes.append(f"{name} changed (sha256 {after[:12]}, pinned {before[:12]})")
    return changes


def pin_messages(pins: dict | None, folder: Path) -> list[str]:
    """Why the checkpoint at ``folder`` is not the one ``pins`` names; empty when it is."""
    if not pins or not pins.get("sha256"):
        return []
    if not folder.is_dir():
        return [f"model folder {folder} is missing; the recipe pins checkpoint "
                f"{pins['sha256'][:12]}"]
    try:
        found = checkpoint_hash(folder)
    except (OSError, ValueError) as exc:
        return [f"cannot hash {folder}: {exc}"]
    if found.sha256 == pins["sha256"]:
        return []
    pinned = CheckpointHash(pins["sha256"], dict(pins.get("files") or {}))
    detail = "; ".join(pin_differences(pinned, found)) or "content differs"
    return [f"checkpoint {folder} is not the one this revision pins "
            f"(sha256 {found.sha256[:12]}, pinned {pins['sha256'][:12]}): {detail}"]
