"""Clean up after a mopt that could not clean up after itself (SIGKILL, power loss, OOM kill).

An archive still ``running`` whose writer is gone is *abandoned*. Its server group may still
run (the parent-death signal covers Linux, not every way a process ends), holding the
accelerator's memory. The next command that uses the runs folder stops that group, but only
when the recorded server pid still belongs to the process that was started then (same start
time), so a reused pid is never touched, then marks the archive ``interrupted`` and seals
it, so no run is lost or left looking alive.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import time
from pathlib import Path

import psutil

from model_optimizer.archive import STATUS_INTERRUPTED, STATUS_RUNNING, RunArchive, utc_now
from model_optimizer.archive.manifest import writer_alive
from model_optimizer.engine.supervisor import group_members

log = logging.getLogger(__name__)
START_TIME_TOLERANCE_S = 0.05
GRACE_S = 10.0


def _status(folder: Path) -> dict:
    try:
        data = json.loads((folder / "status.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def server_still_ours(status: dict) -> bool:
    """True when the recorded server pid runs and started when the archive said it did."""
    pid, started = status.get("server_pid"), status.get("server_started")
    if not isinstance(pid, int) or isinstance(pid, bool) or not isinstance(started, int | float):
        return False
    try:
        return abs(psutil.Process(pid).create_time() - started) <= START_TIME_TOLERANCE_S
    except (psutil.Error, OSError):
        return False


def stop_group(pgid: int, grace_s: float = GRACE_S) -> None:
    """SIGTERM the group, SIGKILL what is left after ``grace_s``; never raises."""
    with contextlib.suppress(OSError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    with contextlib.suppress(OSError):
        if group_members(pgid):
            os.killpg(pgid, signal.SIGKILL)


def _candidates(runs_base: Path) -> list[Path]:
    try:
        tops = [p for p in runs_base.iterdir() if p.is_dir()]
    except OSError:
        return []
    steps = []
    for top in tops:
        with contextlib.suppress(OSError):
            steps += [p for p in (top / "steps").iterdir() if p.is_dir()]
    return steps + tops  # steps first: a parent is finished after its steps


def reap_abandoned(runs_base: str | Path) -> list[Path]:
    """Stop the servers of abandoned archives under ``runs_base``; return those archives."""
    reaped = []
    for folder in _candidates(Path(runs_base)):
        status = _status(folder)
        if status.get("status") != STATUS_RUNNING or writer_alive(status):
            continue
        killed = server_still_ours(status)
        if killed:
            log.warning("stopping server group %s left running by %s", status["server_pid"],
                        folder)
            stop_group(status["server_pid"])
        try:
            archive = RunArchive(folder, str(status.get("id") or folder.name))
            archive.set_status(STATUS_INTERRUPTED, phase="abandoned", abandoned_at=utc_now(),
                               abandoned_server_stopped=killed,
                               abandoned_note="mopt ended without cleaning up; reaped by "
                                              f"pid {os.getpid()}")
            archive.close()
        except OSError as exc:
            log.warning("could not mark %s interrupted: %s", folder, exc)
            continue
        reaped.append(folder)
    return reaped
