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
line and flushed, so a crash or Ctrl-C leaves a readable archive with what was measured.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import yaml

from model_optimizer.archive.entry import ENTRY_KEY, checked
from model_optimizer.archive.names import STATUS_FILE
from model_optimizer.fsutil import atomic_write_text
from model_optimizer.signals import interrupts_deferred

RUNS_DIR_ENV = "MOPT_RUNS_DIR"
DEFAULT_RUNS_DIR = "runs"
FORMAT_VERSION = 1

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
            archive.set_status(STATUS_RUNNING, kind=kind, format_version=FORMAT_VERSION)
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
        """Append one JSON line and flush it to the OS (thread-safe)."""
        line = json.dumps(record, default=str) + "\n"
        with self._lock:
            handle = self._handles.get(name)
            if handle is None:
                handle = open(self.file(name), "a", encoding="utf-8")  # noqa: SIM115
                self._handles[name] = handle
            handle.write(line)
            handle.flush()

    def write_entry(self, **fields: object) -> None:
        """Merge ``fields`` (of ``archive.entry.ENTRY_FIELDS``) into this archive's own row
        of the run index, kept as ``entry`` in ``status.json`` (atomic); the index reads
        nothing else of the archive."""
        current = self.read_status()
        current[ENTRY_KEY] = {**(current.get(ENTRY_KEY) or {}), **checked(fields)}
        self.write_json(STATUS_FILE, current)

    def set_status(self, status: str, **details: object) -> None:
        """Record the run's status (atomic), keeping earlier details."""
        current = self.read_status()
        current.update(details)
        current.update({"status": status, "updated_at": utc_now(), "id": self.id,
                        "pid": os.getpid()})
        self.write_json(STATUS_FILE, current)

    def read_status(self) -> dict:
        """The status record, or {} when none was written yet."""
        try:
            return json.loads(self.file(STATUS_FILE).read_text())
        except (OSError, ValueError):
            return {}

    def close(self) -> None:
        """Close the JSONL files (fsync them first); seal the archive if it has finished.

        Sealing (once the status is no longer ``running``) writes ``manifest.json`` last and
        registers the archive in ``<runs dir>/index.sqlite`` (see ``archive.index.seal``).
        """
        with self._lock:
            for handle in self._handles.values():
                try:
                    handle.flush()
                    os.fsync(handle.fileno())
                finally:
                    handle.close()
            self._handles.clear()
        if self.read_status().get("status") not in (None, STATUS_RUNNING):
            from model_optimizer.archive.index import seal

            seal(self.path)
