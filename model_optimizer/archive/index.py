"""The run index: ``<runs dir>/index.sqlite``, one row per archive (runs, sweeps, their steps).

The folders are the source of truth; the index is a cache for listing and lookup. A row is
an archive's ``status.json`` with the ``entry`` the archive wrote there for itself
(``archive/entry.py``): the index reads that one format and knows no kind's layout. Each row
stores a *signature* of its folder (the modification times of ``status.json`` and
``manifest.json``, both replaced atomically whenever they change).
:func:`refresh` compares the folders on disk with the rows and re-reads only the folders
that are new or whose signature changed, and drops rows of folders that are gone; a missing
or unreadable index, or one of another schema version, is rebuilt from scratch (also
``mopt runs --reindex``).

Concurrent mopt processes share one ``runs/``: every write to the index happens under an
exclusive ``fcntl.flock`` on ``<runs dir>/.lock``, and SQLite runs in WAL mode with a busy
timeout, so readers never block writers and no writer sees a half-written index. Archive
folders themselves are created with a unique ``mkdir`` and written file by file atomically.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path

from model_optimizer.archive.entry import ENTRY_FIELDS, ENTRY_KEY, METRIC_FIELDS
from model_optimizer.archive.names import (
    INDEX_NAME,
    LOCK_NAME,
    MANIFEST_FILE,
    STATUS_FILE,
    STEPS_DIR,
)

LOCK_TIMEOUT_S = 30.0
SCHEMA_VERSION = 1
BUSY_TIMEOUT_S = 60.0

log = logging.getLogger(__name__)

COLUMNS = ("path", "id", "parent", "kind", "created_at", "finished_at", "recipe_name",
           "recipe_revision", "recipe_hash", "recipe_file", "status", "pid", "updated_at",
           "qps", "output_tok_s", "ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "e2e_p50_ms",
           "slo_met", "vllm_version", "hardware", "signature")
_INT_COLUMNS = ("recipe_revision", "pid", "slo_met")


def _column_type(name: str) -> str:
    return "REAL" if name in METRIC_FIELDS else "INTEGER" if name in _INT_COLUMNS else "TEXT"


_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS runs (
    {', '.join(f'{c} {_column_type(c)}' for c in COLUMNS)},
    PRIMARY KEY (path)
);
CREATE INDEX IF NOT EXISTS runs_id ON runs (id);
CREATE INDEX IF NOT EXISTS runs_created ON runs (created_at);
"""


# ----- helpers shared with the history commands ------------------------------------------
def runs_root_of(archive: str | Path) -> Path:
    """The runs dir an archive belongs to (a search step's is the search's parent)."""
    parent = Path(archive).resolve().parent
    while parent.name == STEPS_DIR and (parent.parent / STATUS_FILE).exists():
        parent = parent.parent.parent
    return parent


def shown_status(row: dict) -> str:
    """A row's status for people: ``running`` whose writer is gone is ``abandoned`` (the
    one place that is decided, for ``mopt runs`` and ``mopt status`` alike)."""
    from model_optimizer.archive.manifest import writer_alive

    if row.get("status") == "running" and not writer_alive(
            {"pid": row.get("pid"), "updated_at": row.get("updated_at")}):
        return "abandoned"
    return row.get("status") or "incomplete"


def read_json(path: Path) -> dict | None:
    """A JSON object from ``path``, or None when missing or unreadable."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# ----- reading one folder into a row -------------------------------------------------------
def signature(folder: Path) -> str:
    """What changes whenever an archive's status (with its entry) or manifest is
    (atomically) rewritten."""
    parts = []
    for name in (STATUS_FILE, MANIFEST_FILE):
        try:
            parts.append(str((folder / name).stat().st_mtime_ns))
        except OSError:
            parts.append("-")
    return ":".join(parts)


def read_entry(folder: Path, root: Path) -> dict:
    """The index row of one archive folder: its ``status.json`` and the ``entry`` it wrote
    there for itself (tolerant: a broken folder still gets a row)."""
    status = read_json(folder / STATUS_FILE) or {}
    entry = status.get(ENTRY_KEY)
    row = dict.fromkeys(COLUMNS)
    row.update({k: v for k, v in (entry if isinstance(entry, dict) else {}).items()
                if k in ENTRY_FIELDS})
    row.update({"path": folder.relative_to(root).as_posix(), "id": folder.name,
                "kind": status.get("kind") or "run",
                "status": status.get("status") or "incomplete", "pid": status.get("pid"),
                "updated_at": status.get("updated_at"),
                "finished_at": status.get("finished_at"), "signature": signature(folder)})
    if row["parent"] is None and folder.parent.name == STEPS_DIR:
        row["parent"] = folder.parent.parent.name
    if not row["created_at"]:
        row["created_at"] = _stamp_from_id(folder.name) or row["updated_at"]
    return row


def _stamp_from_id(run_id: str) -> str | None:
    stamp = run_id.split("-", 1)[0]
    if len(stamp) == 16 and stamp[8] == "T" and stamp.endswith("Z"):
        return (f"{stamp[0:4]}-{stamp[4:6]}-{stamp[6:8]}T{stamp[9:11]}:{stamp[11:13]}:"
                f"{stamp[13:15]}Z")
    return None


# ----- scanning, locking, connecting -------------------------------------------------------
def scan(root: Path) -> dict[str, Path]:
    """Archive folders under ``root``: top-level folders and the steps of each, by rel path."""
    found: dict[str, Path] = {}
    if not root.is_dir():
        return found
    for folder in root.iterdir():
        if not folder.is_dir() or folder.name.startswith("."):
            continue
        found[folder.name] = folder
        steps = folder / STEPS_DIR
        if steps.is_dir():
            for step in steps.iterdir():
                if step.is_dir() and not step.name.startswith("."):
                    found[step.relative_to(root).as_posix()] = step
    return found


@contextlib.contextmanager
def locked(root: Path, timeout_s: float | None = None) -> Iterator[None]:
    """Exclusive lock on ``<root>/.lock`` for the duration of an index write.

    Waits at most ``timeout_s`` (``LOCK_TIMEOUT_S``): a hung process holding the lock must
    not block every other mopt forever. Raises TimeoutError (an OSError) after that.
    """
    root.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + (LOCK_TIMEOUT_S if timeout_s is None else timeout_s)
    with open(root / LOCK_NAME, "a+") as handle:
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{root / LOCK_NAME} is held by another mopt process; "
                                       "if none is running, delete the file") from None
                time.sleep(0.1)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _open(root: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(root / INDEX_NAME, timeout=BUSY_TIMEOUT_S)
    conn.row_factory = sqlite3.Row
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    conn.execute("PRAGMA journal_mode = WAL")
    return conn


#: SQLite's result codes for a damaged file: SQLITE_CORRUPT, SQLITE_NOTADB
_CORRUPTION_CODES = (11, 26)


def corrupt(exc: BaseException) -> bool:
    """True when ``exc`` says the index file is damaged (any page, found at any time)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _CORRUPTION_CODES:
        return True
    text = str(exc).lower()
    return isinstance(exc, sqlite3.DatabaseError) and ("malformed" in text
                                                       or "not a database" in text)


def _remove_index(root: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        (root / (INDEX_NAME + suffix)).unlink(missing_ok=True)


def _connect_for_write(root: Path) -> sqlite3.Connection:
    """Open (creating or, if broken or of another schema, recreating) the index. Lock held."""
    try:
        conn = _open(root)
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            conn.execute("DROP TABLE IF EXISTS runs")
        conn.executescript(_SCHEMA)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        return conn
    except sqlite3.DatabaseError:
        _remove_index(root)
        conn = _open(root)
        conn.executescript(_SCHEMA)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        return conn


def _write(root: Path, work) -> dict:
    """Run ``work(conn)`` in one transaction under the lock; an index found damaged on the
    way (a corrupt page shows only when it is read) is removed and rebuilt from every
    folder instead, once."""
    with locked(root):
        for attempt in (1, 2):
            conn = _connect_for_write(root)
            try:
                with conn:
                    return work(conn) if attempt == 1 else _sync(conn, root, True)
            except sqlite3.DatabaseError as exc:
                if attempt == 2 or not corrupt(exc):
                    raise
                log.warning("run index %s is damaged (%s); rebuilding it from the folders",
                            root / INDEX_NAME, exc)
            finally:
                conn.close()
            _remove_index(root)
    raise AssertionError("unreachable")


def _upsert(conn: sqlite3.Connection, rows: list[dict]) -> None:
    marks = ", ".join("?" for _ in COLUMNS)
    conn.executemany(f"INSERT OR REPLACE INTO runs ({', '.join(COLUMNS)}) VALUES ({marks})",
                     [tuple(_cell(row[c]) for c in COLUMNS) for row in rows])


def _cell(value: object) -> object:
    return value if value is None or isinstance(value, int | float | str) else str(value)


# ----- the public operations ----------------------------------------------------------------
def register(archive: str | Path) -> Path:
    """Add or update one archive's row (called when an archive is sealed); returns the root."""
    folder = Path(archive).resolve()
    root = runs_root_of(folder)
    _write(root, lambda conn: _upsert(conn, [read_entry(folder, root)]))
    return root


def refresh(root: str | Path, full: bool = False) -> dict:
    """Bring the index in step with the folders; ``full`` rebuilds every row.

    Returns counts: ``added``, ``updated``, ``removed``, ``total``.
    """
    root = Path(root).resolve()
    counts = {"added": 0, "updated": 0, "removed": 0, "total": 0}
    if not root.is_dir():
        return counts
    if not full and (root / INDEX_NAME).exists():
        stale = _stale(root)
        if stale is not None and not any(stale.values()):
            counts["total"] = stale["count"]
            return counts
    return _write(root, lambda conn: _sync(conn, root, full))


def _stored_signatures(conn: sqlite3.Connection) -> dict[str, str]:
    return {r["path"]: r["signature"] for r in conn.execute("SELECT path, signature FROM runs")}


def _stale(root: Path) -> dict | None:
    """Which folders differ from the index (read-only check), None if the index is unusable."""
    try:
        conn = _open(root)
        try:
            if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
                return None
            stored = _stored_signatures(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return None
    on_disk = scan(root)
    changed = [p for p, f in on_disk.items() if stored.get(p) != signature(f)]
    return {"changed": changed, "removed": [p for p in stored if p not in on_disk],
            "count": len(on_disk)}


def _sync(conn: sqlite3.Connection, root: Path, full: bool) -> dict:
    stored = {} if full else _stored_signatures(conn)
    if full:
        conn.execute("DELETE FROM runs")
    on_disk = scan(root)
    removed = [p for p in stored if p not in on_disk]
    conn.executemany("DELETE FROM runs WHERE path = ?", [(p,) for p in removed])
    changed = [f for p, f in on_disk.items() if stored.get(p) != signature(f)]
    _upsert(conn, [read_entry(folder, root) for folder in changed])
    added = sum(1 for f in changed if f.relative_to(root).as_posix() not in stored)
    return {"added": added, "updated": len(changed) - added, "removed": len(removed),
            "total": len(on_disk)}


def all_rows(root: str | Path, refresh_first: bool = True) -> list[dict]:
    """Every row, newest first (the index is refreshed first unless told otherwise)."""
    root = Path(root).resolve()
    if not root.is_dir():
        return []
    try:
        if refresh_first:
            refresh(root)
        try:
            return _select_all(root)
        except sqlite3.DatabaseError as exc:
            if not corrupt(exc):
                raise
            refresh(root, full=True)  # damaged where only a full read finds it: rebuild
            return _select_all(root)
    except (OSError, sqlite3.Error) as exc:  # a read-only runs dir, a full disk, a broken index
        log.warning("run index of %s unusable (%s); reading the folders", root, exc)
        return rows_from_folders(root)


def _select_all(root: Path) -> list[dict]:
    conn = _open(root)
    try:
        rows = conn.execute("SELECT * FROM runs ORDER BY created_at DESC, id DESC").fetchall()
    finally:
        conn.close()
    return [dict(row) for row in rows]


def rows_from_folders(root: Path) -> list[dict]:
    """Every row read straight from the folders (no index written), newest first."""
    rows = [read_entry(folder, root) for folder in scan(root).values()
            if not folder.name.startswith(INDEX_NAME)]
    return sorted(rows, key=lambda r: (str(r.get("created_at") or ""), r["id"]), reverse=True)


def find(root: str | Path, ref: str) -> list[dict]:
    """Rows whose id equals ``ref``, else starts with it, else ends with ``-ref``."""
    rows = all_rows(root)
    for match in (lambda r: r["id"] == ref, lambda r: r["id"].startswith(ref),
                  lambda r: r["id"].endswith(f"-{ref}")):
        hits = [r for r in rows if match(r)]
        if hits:
            return hits
    return []


def seal(archive: str | Path) -> None:
    """Write the manifest of a finished archive, then register it in the index.

    Runs at the end of every run (in cleanup), so it never raises: a failure is logged,
    and the index catches up on its next refresh.
    """
    from model_optimizer.archive.manifest import write_manifest

    try:
        write_manifest(archive)
    except OSError as exc:
        log.warning("could not write the manifest of %s: %s", archive, exc)
        return
    try:
        register(archive)
    except (OSError, sqlite3.Error) as exc:
        log.warning("could not register %s in the run index: %s", archive, exc)
