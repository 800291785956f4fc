"""Crash-safe file writing: a reader sees the old file or the new one, never half of one;
an appended line is all there or not there; a full disk is recognised in one place."""

from __future__ import annotations

import contextlib
import errno
import io
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

#: the errors of a full file system (no space, or the user's quota reached)
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)


def disk_full(exc: BaseException) -> bool:
    """True when ``exc`` says the file system has no room left."""
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def free_bytes(path: str | Path) -> int | None:
    """Bytes free for this user on the file system holding ``path`` (its nearest existing
    ancestor), or None when that cannot be told."""
    here = Path(path).absolute()
    while not here.exists() and here != here.parent:
        here = here.parent
    try:
        return shutil.disk_usage(here).free
    except OSError:
        return None


def append_whole(fd: int, data: bytes) -> None:
    """Append ``data`` to the open file ``fd`` entirely, or not at all: a write cut short
    (a full disk) is truncated away before the error is raised, so no torn line stays."""
    end = os.lseek(fd, 0, os.SEEK_END)
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, end)
        raise


def _default_mode() -> int:
    """0666 minus the process umask: what open() would have given the file."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write_bytes(path: str | Path, data: bytes, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` through a temporary file, fsync and rename; ``mode``: the
    permission bits (default: what open() would give a new file)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, _default_mode() if mode is None else mode)  # mkstemp makes 0600
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """UTF-8 text version of :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_update_text(path: str | Path, text: str) -> Path:
    """Atomically replace the text of a user's file (a recipe): through a symbolic link,
    the file it points to is updated, keeping its permission bits; return that file."""
    real = Path(os.path.realpath(path))
    try:
        mode: int | None = stat.S_IMODE(os.stat(real).st_mode)
    except FileNotFoundError:
        mode = None
    atomic_write_bytes(real, text.encode("utf-8"), mode)
    return real


def save_figure(fig: Any, path: str | Path, **savefig: Any) -> None:
    """Render a matplotlib figure to PNG in memory, then write it like any archive file: an
    interrupted plot leaves the previous image (or none), never half of one. The caller
    closes the figure."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", **savefig)
    atomic_write_bytes(path, buffer.getvalue())
