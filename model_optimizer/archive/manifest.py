"""Archive integrity: ``manifest.json`` (SHA-256 of every file) and its verification.

A finished archive (run, bench, sweep, rollback) gets a manifest as its very last file,
written atomically::

    {"manifest_format": 1, "archive_format": 1, "id": "...", "kind": "run",
     "algorithm": "sha256", "sealed_at": "...Z",
     "files": {"metrics.json": {"sha256": "...", "bytes": 1234}, ...}}

Every regular, non-hidden file of the folder is listed. A sweep lists its own files; its
steps (``steps/<id>/``) are archives with their own manifests, and the sweep's manifest
lists each step's ``manifest.json`` (so a step's manifest cannot be swapped unnoticed).

:func:`verify_archive` returns every problem found, each naming the file and what is wrong:
no ``status.json`` or a status still ``running`` whose writer is gone (a half-written
archive), a missing or unreadable manifest, a listed file that is missing, a file whose
SHA-256 differs from the manifest (tampered), a file the manifest does not list.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import psutil

from model_optimizer.archive.names import (
    MANIFEST_FILE,
    STATUS_FILE,
    STEPS_DIR,
)
from model_optimizer.errors import UsageError
from model_optimizer.fsutil import atomic_write_text

MANIFEST_NAME = MANIFEST_FILE  # the name other modules import from here
MANIFEST_FORMAT = 1
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ArchiveProblem:
    """One thing wrong with an archive: which file, what kind of problem, in words."""

    archive: str
    file: str | None
    kind: str  # no_archive | no_status | in_progress | half_written | missing_manifest |
    #            bad_manifest | missing_file | tampered | unexpected_file
    message: str
    expected: str | None = None
    actual: str | None = None

    def format(self) -> str:
        """``<archive>/<file>: <kind>: <message>``."""
        where = f"{self.archive}/{self.file}" if self.file else self.archive
        return f"{where}: {self.kind.replace('_', ' ')}: {self.message}"

    def to_dict(self) -> dict:
        """JSON form."""
        return {"archive": self.archive, "file": self.file, "kind": self.kind,
                "message": self.message, "expected": self.expected, "actual": self.actual}


class ArchiveError(UsageError):
    """An archive that failed verification; nothing was read from it or written."""

    def __init__(self, path: Path, problems: list[ArchiveProblem]):
        self.path = path
        self.problems = problems
        lines = [p.format() for p in problems]
        count = len(problems)
        lines.append(f"{path}: refusing to use this archive ({count} problem"
                     f"{'s' if count != 1 else ''}); nothing was modified.")
        super().__init__("\n".join(lines))


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def archive_files(path: Path) -> list[str]:
    """The files a manifest covers, as sorted POSIX paths relative to ``path``.

    Hidden files (temporary files of atomic writes) and the manifest itself are left out;
    under ``steps/`` only each step's ``manifest.json`` is covered.
    """
    out = []
    for item in sorted(path.rglob("*")):
        rel = item.relative_to(path)
        if any(part.startswith(".") for part in rel.parts) or not item.is_file():
            continue
        if rel.parts[0] == STEPS_DIR and len(rel.parts) > 1:
            if not (len(rel.parts) == 3 and rel.parts[2] == MANIFEST_NAME):
                continue
        elif rel.as_posix() == MANIFEST_NAME:
            continue
        out.append(rel.as_posix())
    return out


def _read_json(path: Path) -> dict | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_manifest(path: str | Path) -> dict:
    """Hash every file of the archive at ``path`` and write ``manifest.json`` atomically."""
    folder = Path(path)
    status = _read_json(folder / STATUS_FILE) or {}
    files = {}
    for rel in archive_files(folder):
        target = folder / rel
        files[rel] = {"sha256": sha256_file(target), "bytes": target.stat().st_size}
    manifest = {"manifest_format": MANIFEST_FORMAT,
                "archive_format": status.get("format_version"),
                "id": status.get("id", folder.name), "kind": status.get("kind", "run"),
                "algorithm": "sha256",
                "sealed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                "files": files}
    atomic_write_text(folder / MANIFEST_NAME, json.dumps(manifest, indent=2) + "\n")
    return manifest


def writer_alive(status: dict) -> bool:
    """Whether the process that last wrote ``status`` still runs (pid reuse aware)."""
    pid = status.get("pid")
    if not isinstance(pid, int):
        return False
    try:
        started = psutil.Process(pid).create_time()
    except (psutil.Error, OSError):
        return False
    updated = _epoch(status.get("updated_at"))
    return updated is None or started <= updated + 1.0


def _epoch(stamp: object) -> float | None:
    if not isinstance(stamp, str):
        return None
    try:
        return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _status_problems(folder: Path, label: str) -> list[ArchiveProblem]:
    if not folder.is_dir():
        return [ArchiveProblem(label, None, "no_archive", "no such archive folder")]
    status = _read_json(folder / STATUS_FILE)
    if status is None:
        return [ArchiveProblem(label, STATUS_FILE, "no_status",
                               "missing or unreadable: the archive was never completed "
                               "(half-written, or not made by mopt)")]
    if status.get("status") == "running":
        pid = status.get("pid")
        if writer_alive(status):
            return [ArchiveProblem(label, STATUS_FILE, "in_progress",
                                   f"still being written by pid {pid}; wait until it "
                                   "finishes")]
        kind = status.get("kind")
        hint = (f"; continue it with `mopt {kind} --resume {folder}`"
                if kind in ("sweep", "tune") else "")
        return [ArchiveProblem(label, STATUS_FILE, "half_written",
                               f"status is still 'running' but its writer (pid {pid}) is "
                               "gone: the process was killed before the archive was "
                               f"finished, so its figures are incomplete{hint}")]
    return []


def _manifest_or_problem(folder: Path, label: str) -> tuple[dict | None, list[ArchiveProblem]]:
    target = folder / MANIFEST_NAME
    if not target.exists():
        return None, [ArchiveProblem(label, MANIFEST_NAME, "missing_manifest",
                                     "the archive has no manifest, so its files cannot be "
                                     "checked (removed, or the archive was not sealed by "
                                     "mopt)")]
    manifest = _read_json(target)
    if (manifest is None or manifest.get("manifest_format") != MANIFEST_FORMAT
            or not isinstance(manifest.get("files"), dict)):
        return None, [ArchiveProblem(label, MANIFEST_NAME, "bad_manifest",
                                     "unreadable, or not a manifest of format "
                                     f"{MANIFEST_FORMAT}")]
    return manifest, []


def _file_problems(folder: Path, label: str, listed: dict) -> list[ArchiveProblem]:
    problems = []
    for rel, entry in sorted(listed.items()):
        target = folder / rel
        if not _inside(folder, rel):
            problems.append(ArchiveProblem(label, rel, "outside_archive",
                                           "the manifest names a file outside the archive"))
            continue
        expected = entry.get("sha256") if isinstance(entry, dict) else None
        if not target.is_file():
            problems.append(ArchiveProblem(label, rel, "missing_file",
                                           "listed in the manifest but missing",
                                           expected=expected))
            continue
        actual = sha256_file(target)
        if actual != expected:
            problems.append(ArchiveProblem(
                label, rel, "tampered",
                f"SHA-256 is {actual[:16]}... but the manifest says "
                f"{str(expected)[:16]}...: the file changed after the archive was sealed",
                expected=expected, actual=actual))
    for rel in archive_files(folder):
        if rel not in listed:
            problems.append(ArchiveProblem(label, rel, "unexpected_file",
                                           "not listed in the manifest: added after the "
                                           "archive was sealed"))
    return problems


def _inside(folder: Path, rel: str) -> bool:
    """True when ``rel`` is a relative path that stays inside ``folder`` (no .., no link out)."""
    if not isinstance(rel, str) or not rel or Path(rel).is_absolute() or ".." in Path(rel).parts:
        return False
    try:
        return (folder / rel).resolve().is_relative_to(folder.resolve())
    except (OSError, ValueError):
        return False


def verify_archive(path: str | Path, deep: bool = False) -> list[ArchiveProblem]:
    """Every problem of the archive at ``path``; an empty list means it is intact.

    ``deep`` also verifies the step archives of a sweep.
    """
    folder = Path(path)
    label = str(folder)
    problems = _status_problems(folder, label)
    if problems:
        return problems
    manifest, problems = _manifest_or_problem(folder, label)
    if manifest is None:
        return problems
    problems = _file_problems(folder, label, manifest["files"])
    if deep and (folder / STEPS_DIR).is_dir():
        for step in sorted(p for p in (folder / STEPS_DIR).iterdir() if p.is_dir()):
            problems.extend(verify_archive(step))
    return problems


def require_intact(path: str | Path, deep: bool = False) -> Path:
    """``path`` if its archive verifies, else raise :class:`ArchiveError` naming each problem."""
    problems = verify_archive(path, deep=deep)
    if problems:
        raise ArchiveError(Path(path), problems)
    return Path(path)
