"""Checkpoint pins: the SHA-256 of a model folder's weights and config, and drift from it.

Every validated recipe revision (`mopt quantize`, `optimize`, `sweep`, `tune`) pins, in
``model.pins``, the content of the checkpoint it was made and validated on, quantized or
not. The hash covers the files that decide what the model computes: weights
(``*.safetensors``, ``*.bin``, ``*.pt``, ``*.pth``, ``*.gguf``), ``config.json`` and
``generation_config.json``, plus the safetensors index.
Tokenizer files are left out (a re-saved tokenizer is not a new model). The folder hash is
the SHA-256 of the sorted lines ``<relative name>\\0<file sha256>\\n``, so a renamed, added,
removed or edited file each changes it, and the per-file hashes name what changed.

A hub id has no folder to hash: its revision pins the commit it was measured at
(``model.pins.commit``, :func:`hub_pins`), the commit its branch names in the local Hugging
Face cache (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``:
``models--ORG--NAME/refs/BRANCH``; no network). Drift is that branch naming another commit
now (:func:`hub_pin_messages`). ``export`` also asks the hub when online (:func:`hub_commit`).
"""

from __future__ import annotations

import hashlib
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
CONFIG_FILES = ("config.json", "generation_config.json", "model.safetensors.index.json",
                "pytorch_model.bin.index.json")
CHUNK = 1 << 20
MAX_HASH_THREADS = 8  # shards of a large checkpoint are hashed in parallel, one per core
#: a full git commit id, what the hub's refs hold
COMMIT = re.compile(r"[0-9a-f]{40}")
#: the hub's default branch, served when a recipe names no revision
DEFAULT_BRANCH = "main"
HUB_TIMEOUT_S = 10.0
_TRUE = ("1", "true", "yes", "on")


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


def hub_cache_dir(environ: dict[str, str] | None = None) -> Path:
    """The Hugging Face hub cache, as huggingface_hub finds it (read at call time)."""
    env = os.environ if environ is None else environ
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"]).expanduser()
    home = env.get("HF_HOME") or str(Path(env.get("XDG_CACHE_HOME") or "~/.cache")
                                     / "huggingface")
    return Path(home).expanduser() / "hub"


def cached_ref(repo_id: str, revision: str) -> Path:
    """The local cache's file naming the commit of ``revision`` (a branch or tag)."""
    return hub_cache_dir() / ("models--" + repo_id.replace("/", "--")) / "refs" / revision


def cached_commit(repo_id: str, revision: str, cache: Path | None = None) -> str | None:
    """The commit ``refs/<revision>`` names in the local cache (a commit revision is its
    own), or None (nothing read but that one small file)."""
    if COMMIT.fullmatch(revision):
        return revision
    folder = (cache or hub_cache_dir()) / ("models--" + repo_id.replace("/", "--"))
    try:
        text = (folder / "refs" / revision).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return text if COMMIT.fullmatch(text) else None


def hub_commit(repo_id: str, revision: str) -> str | None:
    """The commit of ``revision``: the local cache's, else the hub's (None offline, on any
    error, or after ``HUB_TIMEOUT_S``)."""
    found = cached_commit(repo_id, revision)
    if found or os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE:
        return found
    try:
        from huggingface_hub import HfApi

        sha = HfApi().model_info(repo_id, revision=revision, timeout=HUB_TIMEOUT_S).sha
    except Exception:  # noqa: BLE001 - no network, no such repo, a proxy: not pinned here
        return None
    return sha if isinstance(sha, str) and COMMIT.fullmatch(sha) else None


def hub_pins(repo_id: str, revision: str | None) -> dict | None:
    """The ``model.pins`` block of a revision serving hub model ``repo_id``: the commit its
    revision (a branch, ``main`` when None) names in the local cache, the model as source;
    None when the cache names none (nothing measured from it here)."""
    commit = cached_commit(repo_id, revision or DEFAULT_BRANCH)
    if commit is None:
        return None
    return {"commit": commit, "source": {"path": repo_id, "revision": revision}}


def hub_pin_messages(pins: dict | None, repo_id: str, revision: str | None) -> list[str]:
    """Why hub model ``repo_id`` at ``revision`` is not the commit ``pins`` names: its branch
    names another commit in the local cache now; empty when it is, or when nothing tells."""
    pinned = (pins or {}).get("commit")
    branch = revision or DEFAULT_BRANCH
    now = cached_commit(repo_id, branch)
    if not pinned or now is None or now == pinned:
        return []
    return [f"hub model {repo_id} at {branch!r} names commit {now[:12]} in the local cache "
            f"({cached_ref(repo_id, branch)}); this revision was measured at {pinned[:12]} "
            "(model.pins.commit)"]
