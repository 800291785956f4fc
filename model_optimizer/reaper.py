"""Clean up after a mopt that could not clean up after itself (SIGKILL, power loss, OOM kill).

An archive still ``running`` whose writer is gone is *abandoned*. Its server was reaped
within seconds by mopt's watchdog (``engine/watchdog.py``) unless that died with mopt (power
loss, an OOM kill of the whole job); then parts of it may still run, holding the
accelerator's memory. The next command that uses the runs folder stops them, then marks the
archive ``interrupted`` and seals it, so no run is lost or left looking alive. An archive
whose final status was written but whose manifest was not (killed in between) is sealed as
it stands.

The reaper acts on a process only with proof that it is that archive's server (the rule is
:func:`server_processes`): every server mopt launches carries the absolute path of its
archive in its environment (``engine.supervisor.OWNER_ENV``), which its children inherit,
and writes to the archive's ``engine.log``, which they inherit too (vLLM's engine core and
worker overwrite their environment when they set their process title: for them the log is
the proof). The archive must be a real folder under the runs dir (no symbolic link on the
way) and its log a regular file with no other hard link, so a forged or linked
``status.json`` can neither name a victim nor make mopt write elsewhere. Pids and start
times recorded in ``status.json`` are never trusted on their own.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from pathlib import Path

import psutil

from model_optimizer.archive import STATUS_INTERRUPTED, STATUS_RUNNING, RunArchive, utc_now
from model_optimizer.archive.index import seal
from model_optimizer.archive.manifest import writer_alive
from model_optimizer.archive.names import ENGINE_LOG, MANIFEST_FILE, STATUS_FILE, STEPS_DIR
from model_optimizer.archive.run import RESERVE_NAME
from model_optimizer.engine.supervisor import OWNER_ENV, owner_tag
from model_optimizer.engine.watchdog import file_identity, writes_to

log = logging.getLogger(__name__)
GRACE_S = 10.0


def _status(folder: Path) -> dict:
    try:
        data = json.loads((folder / STATUS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def real_archive(folder: Path, runs_base: Path) -> bool:
    """True when ``folder`` is a directory reached from ``runs_base`` through no symbolic
    link, holding a regular ``status.json``: only such an archive is ever written to."""
    try:
        rel = folder.relative_to(runs_base)
        inside = folder.resolve() == runs_base.resolve() / rel
        return (inside and stat.S_ISDIR(os.lstat(folder).st_mode)
                and stat.S_ISREG(os.lstat(folder / STATUS_FILE).st_mode))
    except (OSError, ValueError):
        return False


def server_processes(folder: Path) -> list[psutil.Process]:
    """The live processes proven to belong to the server the archive at ``folder``
    launched: those whose environment names this very archive (``OWNER_ENV``), and those
    whose stdout or stderr is its ``engine.log``."""
    tag, found = owner_tag(folder), []
    log_id = file_identity(folder / ENGINE_LOG)
    for proc in psutil.process_iter(["environ", "status"]):
        env = proc.info.get("environ") or {}  # None: another user's process, unreadable
        if proc.pid == os.getpid() or proc.info.get("status") == psutil.STATUS_ZOMBIE:
            continue
        if env.get(OWNER_ENV) == tag or (log_id and writes_to(proc.pid, log_id)):
            found.append(proc)
    return found


def stop_processes(processes: list[psutil.Process], grace_s: float = GRACE_S) -> int:
    """SIGTERM ``processes``, SIGKILL those left after ``grace_s``; return how many were
    signalled. psutil checks each one's start time first, so a reused pid is never hit."""
    signalled = []
    for proc in processes:
        try:
            proc.terminate()
            signalled.append(proc)
        except psutil.Error:
            continue
    _, alive = psutil.wait_procs(signalled, timeout=grace_s)
    for proc in alive:
        try:
            proc.kill()
        except psutil.Error:
            continue
    psutil.wait_procs(alive, timeout=grace_s)
    return len(signalled)


def _candidates(runs_base: Path) -> list[Path]:
    try:
        tops = [p for p in runs_base.iterdir() if p.is_dir() and not p.name.startswith(".")]
    except OSError:
        return []
    steps = []
    for top in tops:
        try:
            steps += [p for p in (top / STEPS_DIR).iterdir() if p.is_dir()]
        except OSError:
            continue
    return steps + tops  # steps first: a parent is finished after its steps


def _mark_abandoned(folder: Path, status: dict, stopped: int) -> bool:
    try:
        archive = RunArchive(folder, str(status.get("id") or folder.name))
        archive.set_status(STATUS_INTERRUPTED, phase="abandoned", abandoned_at=utc_now(),
                           abandoned_server_stopped=stopped > 0,
                           abandoned_processes_stopped=stopped,
                           abandoned_note="mopt ended without cleaning up; reaped by "
                                          f"pid {os.getpid()}")
        archive.close()
    except OSError as exc:
        log.warning("could not mark %s interrupted: %s", folder, exc)
        return False
    return True


def reap_abandoned(runs_base: str | Path) -> list[Path]:
    """Stop the servers of abandoned archives under ``runs_base`` and mark those archives
    interrupted; seal finished archives left without a manifest. Return the archives
    reaped (not those only sealed)."""
    base, reaped = Path(runs_base), []
    for folder in _candidates(base):
        if not real_archive(folder, base):
            continue
        status = _status(folder)
        state = status.get("status")
        if not isinstance(state, str) or writer_alive(status):
            continue
        if state != STATUS_RUNNING:
            if not (folder / MANIFEST_FILE).exists():
                log.warning("sealing %s: it ended (%s) but was never sealed", folder, state)
                (folder / RESERVE_NAME).unlink(missing_ok=True)
                seal(folder)
            continue
        stopped = stop_processes(server_processes(folder))
        if _mark_abandoned(folder, status, stopped):
            log.warning("reaped abandoned run %s (mopt was killed): %s", folder.name,
                        f"stopped {stopped} server process(es)" if stopped
                        else "no server process was left")
            reaped.append(folder)
    return reaped
