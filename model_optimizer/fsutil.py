"""Crash-safe file writing: a reader sees the old file or the new one, never half of one."""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path
from typing import Any


def _default_mode() -> int:
    """0666 minus the process umask: what open() would have given the file."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write_bytes(path: str | Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file, fsync and rename."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, _default_mode())  # mkstemp makes 0600; keep archives readable as usual
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """UTF-8 text version of :func:`atomic_write_bytes`."""
    atomic_write_bytes(path, text.encode("utf-8"))


def save_figure(fig: Any, path: str | Path, **savefig: Any) -> None:
    """Render a matplotlib figure to PNG in memory, then write it like any archive file: an
    interrupted plot leaves the previous image (or none), never half of one. The caller
    closes the figure."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", **savefig)
    atomic_write_bytes(path, buffer.getvalue())
