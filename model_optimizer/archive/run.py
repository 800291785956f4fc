"""The run folder: one measured run (or sweep step) of one recipe, written crash-safe.

Layout of ``runs/<UTC time>-<recipe name>-<short id>/``::

    status.json        running | ok | failed:<class> | interrupted, updated as the run goes;
                       ``entry``: the run's row of the run index (archive/entry.py)
    run.json           id, times, argv and environment (secrets redacted), versions, hardware
    recipe.given.yaml  the recipe file exactly as given (plus the --set overrides in run.json)
    recipe.resolved.yaml  with every default filled in, as run
    engine.log         the server's stdout and stderr
    requests.jsonl     one line per measured request, appended as each finishes
    telemetry.jsonl    one line per /metrics + memory sample
    metrics.json       the aggregate figures
    report.md          a short human report
    manifest.json      SHA-256 of every file, written last when the run is sealed

Every JSON/YAML/Markdown file is written atomically; the JSONL files are appended line by
line, each line whole or not at all, so a crash or Ctrl-C leaves a readable archive with
what was measured.

A full disk: each archive holds ``RESERVE_BYTES`` of room in a hidden ``.reserve`` file from
its creation, released (deleted) when the final status cannot be written for want of space,
and always before sealing, so a run that filled the disk still ends with its final status
and manifest. An archive whose start files do not fit is removed and :class:`DiskFull`
raised: nothing half-made is left to list.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import yaml

from model_optimizer.archive.entry import ENTRY_KEY, checked
from model_optimizer.archive.names import STATUS_FILE
from model_optimizer.errors import UsageError
from model_optimizer.fsutil import append_whole, atomic_write_text, disk_full, free_bytes
from model_optimizer.signals import interrupts_deferred

RUNS_DIR_ENV = "MOPT_RUNS_DIR"
DEFAULT_RUNS_DIR = "runs"
FORMAT_VERSION = 1
RESERVE_NAME = ".reserve"
RESERVE_BYTES = 256 * 1024  # a final status, metrics, report and manifest with their temps

STATUS_RUNNING = "running"
STATUS_OK = "ok"
STATUS_INTERRUPTED = "interrupted"


def failed_status(kind: str) -> str:
    """The status string of a failed run: ``failed:<class>``."""
    return f"failed:{kind}"


def runs_dir(explicit: str | Path | None = None) -> Path:
    """Where archives go: ``--runs-dir``, else $MOPT_RUNS_DIR, else ``runs/``."""
    return Path(explicit or os.environ.get(RUNS_DIR_ENV) or DEFAULT_RUNS_DIR)


def utc_now() -> str:
    """Current UTC time, ISO 8601 with a Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class DiskFull(UsageError):
    """The runs dir has no room for a new archive (nothing of it was left behind)."""

    def __init__(self, base: Path, exc: OSError):
        free = free_bytes(base)
        super().__init__(f"{base}: no space left for a new archive ({exc.strerror}; "
                         f"{'unknown' if free is None else free} bytes free); nothing was "
                         "run or archived. Free some space there, or give another "
                         "--runs-dir.")


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-")[:48] or "recipe"


@dataclass
class RunArchive:
    """Writer for one run folder. Create with :meth:`create`."""

    path: Path
    id: str
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _handles: dict = field(default_factory=dict, repr=False)

    @classmethod
    def create(cls, base: str | Path, recipe_name: str, kind: str = "run",
               start: Callable[[RunArchive], None] | None = None) -> RunArchive:
        """Make a new, uniquely named run folder under ``base``, mark it running, and let
        ``start`` write its start files (run.json, the recipe, the index row).

        Ctrl-C and the terminating signals are held from the folder's creation until the
        start files are written, so no archive is left without them; one that arrived in
        that moment marks the archive interrupted (sealed) and is re-raised.
        """
        archive: RunArchive | None = None
        try:
            with interrupts_deferred():
                archive = cls._new_folder(Path(base), recipe_name, kind)
                if start is not None:
                    start(archive)
        except KeyboardInterrupt:
            if archive is not None:
                archive.set_status(STATUS_INTERRUPTED, phase="created")
                archive.close()
            raise
        except OSError as exc:
            if not disk_full(exc):
                raise
            if archive is not None:
                archive.close(seal=False)
                shutil.rmtree(archive.path, ignore_errors=True)
            raise DiskFull(Path(base), exc) from None
        return archive

    @classmethod
    def _new_folder(cls, base_path: Path, recipe_name: str, kind: str) -> RunArchive:
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        base_path.mkdir(parents=True, exist_ok=True)
        for _ in range(10):
            run_id = f"{stamp}-{_slug(recipe_name)}-{secrets.token_hex(3)}"
            path = base_path / run_id
            try:
                path.mkdir()
            except FileExistsError:
                continue
            archive = cls(path, run_id)
            try:
                archive.set_status(STATUS_RUNNING, kind=kind, format_version=FORMAT_VERSION)
                archive.file(RESERVE_NAME).write_bytes(bytes(RESERVE_BYTES))
            except OSError:
                shutil.rmtree(path, ignore_errors=True)
                raise
            return archive
        raise RuntimeError(f"could not create a unique run folder under {base_path}")

    def file(self, name: str) -> Path:
        """Path of a file inside the run folder."""
        return self.path / name

    def write_json(self, name: str, data: object) -> None:
        """Atomically write ``data`` as pretty JSON."""
        atomic_write_text(self.file(name), json.dumps(data, indent=2, default=str) + "\n")

    def write_yaml(self, name: str, data: object, header: str = "") -> None:
        """Atomically write ``data`` as YAML (safe dumper, key order kept)."""
        atomic_write_text(self.file(name), header + yaml.safe_dump(data, sort_keys=False))

    def write_text(self, name: str, text: str) -> None:
        """Atomically write text."""
        atomic_write_text(self.file(name), text)

    def append_jsonl(self, name: str, record: dict) -> None:
        """Append one JSON line, whole or not at all, straight to the OS (thread-safe)."""
        line = (json.dumps(record, default=str) + "\n").encode("utf-8")
        with self._lock:
            fd = self._handles.get(name)
            if fd is None:
                fd = os.open(self.file(name), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
                self._handles[name] = fd
            append_whole(fd, line)

    def write_entry(self, **fields: object) -> None:
        """Merge ``fields`` (of ``archive.entry.ENTRY_FIELDS``) into this archive's own row
        of the run index, kept as ``entry`` in ``status.json`` (atomic); the index reads
        nothing else of the archive."""
        current = self.read_status()
        current[ENTRY_KEY] = {**(current.get(ENTRY_KEY) or {}), **checked(fields)}
        self.write_json(STATUS_FILE, current)

    def set_status(self, status: str, **details: object) -> None:
        """Record the run's status (atomic), keeping earlier details. A final status that
        does not fit on a full disk is written in the room the archive kept for it."""
        current = self.read_status()
        current.update(details)
        current.update({"status": status, "updated_at": utc_now(), "id": self.id,
                        "pid": os.getpid()})
        try:
            self.write_json(STATUS_FILE, current)
        except OSError as exc:
            if status == STATUS_RUNNING or not disk_full(exc) or not self.release_reserve():
                raise
            self.write_json(STATUS_FILE, current)

    def release_reserve(self) -> bool:
        """Give back the room kept for the archive's ending; False if there was none."""
        try:
            self.file(RESERVE_NAME).unlink()
        except OSError:
            return False
        return True

    def read_status(self) -> dict:
        """The status record, or {} when none was written yet."""
        try:
            return json.loads(self.file(STATUS_FILE).read_text())
        except (OSError, ValueError):
            return {}

    def close(self, seal: bool = True) -> None:
        """Close the JSONL files (fsync them first); seal the archive if it has finished.

        Sealing (once the status is no longer ``running``) releases the reserve, writes
        ``manifest.json`` last and registers the archive in ``<runs dir>/index.sqlite``
        (see ``archive.index.seal``).
        """
        with self._lock:
            for fd in self._handles.values():
                try:
                    os.fsync(fd)
                except OSError:
                    pass  # what was written stays; a full disk must not stop the sealing
                finally:
                    os.close(fd)
            self._handles.clear()
        if seal and self.read_status().get("status") not in (None, STATUS_RUNNING):
            from model_optimizer.archive.index import seal as seal_archive

            self.release_reserve()
            seal_archive(self.path)
