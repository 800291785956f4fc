"""A watchdog that stops a server's processes within seconds of mopt's death, however it died.

The parent-death signal (``signals.parent_death_signal``) reaches one process and asks it to
stop; vLLM does not act on it while it starts, and its engine core and workers are other
processes. So mopt also starts this small program (``python -I -S`` on this file: standard
library only, no site-packages, running in milliseconds) in a session of its own, out of
reach of a Ctrl-C or a kill sent to mopt's process group. It reads a pipe whose write end only
mopt holds (close-on-exec, and closed in any child mopt forks); when the pipe ends, mopt is
gone, whatever the signal, and the watchdog reaps every process it watches:

1. SIGTERM to each watched group and to every process it recorded, then ``grace_s`` seconds;
2. SIGKILL to all that remain (and to any child they started meanwhile), until none is left;
3. a line in the watched server's log; then it exits.

While mopt lives, the watchdog records every ``SCAN_S`` seconds the members of each watched
process group and all their descendants (from ``/proc``: pid and start time, so a reused pid
is never signalled), because vLLM's processes can leave the group and be reparented to init.
At the end, a ``tag`` (``NAME=value``) also claims every process whose environment holds it,
and ``log_path`` every process whose stdout or stderr is that file.
A group is signalled only while a recorded process is still in it (the kernel does not reuse
a pid that names a live group). Normal stops release their watch; when the last one is
released mopt closes the pipe and the watchdog exits at once, so none outlives its use.

Use :data:`WATCHDOG` (one per mopt process): ``handle = WATCHDOG.watch(pid, tag=...,
log_path=...)`` right after starting a process in a session of its own, ``handle.release()``
once it is stopped. Linux only (``/proc``); elsewhere ``watch`` returns a handle that does
nothing.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time

SCAN_S = 0.5  # recording interval while mopt lives
POLL_S = 0.1  # while reaping
KILL_ROUNDS_S = 10.0  # SIGKILL rounds after the grace period, at most
DEFAULT_GRACE_S = 3.0
START_TIMEOUT_S = 10.0
READY = b"ready\n"  # the watchdog's one output: its signal dispositions are set
HAS_PROC = os.path.isdir("/proc/self")
log = logging.getLogger(__name__)


# ---- the watchdog program (standard library only: it runs under ``python -I -S``) ----

def _stat(pid: int) -> tuple[int, int, int, str] | None:
    """(parent pid, process group, start time in clock ticks, state letter); None if gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()  # the name may hold ")"
        return int(fields[1]), int(fields[2]), int(fields[19]), fields[0].decode()
    except (OSError, ValueError, IndexError):
        return None


def proc_table() -> dict[int, tuple[int, int, int, str]]:
    """Every process: pid -> ``_stat(pid)``."""
    rows = {int(name): _stat(int(name)) for name in os.listdir("/proc") if name.isdigit()}
    return {pid: row for pid, row in rows.items() if row is not None}


def _start_time(pid: int) -> int | None:
    """The start time of ``pid`` while it runs (None once it is gone or a zombie)."""
    row = _stat(pid)
    return row[2] if row and row[3] not in "ZX" else None


def file_identity(path: str | os.PathLike) -> tuple[int, int] | None:
    """(device, inode) of a regular file with one link (no hard link can alias it)."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    regular = (info.st_mode & 0o170000) == 0o100000
    return (info.st_dev, info.st_ino) if regular and info.st_nlink == 1 else None


def writes_to(pid: int, identity: tuple[int, int]) -> bool:
    """True when ``pid``'s stdout or stderr is the file ``identity``: a descendant of the
    server, which inherited its log (its environment may be unreadable: vLLM's engine core
    and worker set their process title, which overwrites it)."""
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            info = os.stat(f"/proc/{pid}/fd/{fd}")
            if (info.st_dev, info.st_ino) == identity:
                return True
    return False


def _claimed(pid: int, tag: bytes | None, log_id: tuple[int, int] | None) -> bool:
    """The process carries the watch's tag in its environment, or writes to its log."""
    if log_id and writes_to(pid, log_id):
        return True
    if not tag:
        return False
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return tag in handle.read().split(b"\0")
    except OSError:
        return False


class Watched:
    """One watched process: its group, and every process recorded as its own."""

    def __init__(self, pid: int, start: int, grace_s: float, tag: str | None,
                 log_path: str | None):
        self.pid, self.grace_s, self.log_path = pid, grace_s, log_path
        self.tag = tag.encode() if tag else None
        self.log_id = file_identity(log_path) if log_path else None
        self.known = {pid: start}  # pid -> start time

    def alive(self, table: dict) -> set[int]:
        """Recorded processes still running (same pid and start time, not a zombie)."""
        return {pid for pid, start in self.known.items()
                if pid in table and table[pid][2] == start and table[pid][3] not in "ZX"}

    def group_is_ours(self, table: dict) -> bool:
        return any(table[pid][1] == self.pid for pid in self.alive(table))

    def record(self, table: dict, tags: bool = False) -> None:
        """Add the group's members, the descendants of recorded processes, tagged ones."""
        me = os.getpid()
        if self.group_is_ours(table):
            self.known.update({pid: row[2] for pid, row in table.items()
                               if row[1] == self.pid and pid != me})
        parents, grew = self.alive(table), True
        while grew:
            children = {pid for pid, row in table.items()
                        if row[0] in parents and pid not in parents and pid != me}
            grew = bool(children)
            parents |= children
            self.known.update({pid: table[pid][2] for pid in children})
        if tags and (self.tag or self.log_id):
            self.known.update({pid: row[2] for pid, row in table.items()
                               if pid != me and row[3] not in "ZX"
                               and _claimed(pid, self.tag, self.log_id)})

    def signal(self, table: dict, sig: int) -> int:
        """Send ``sig`` to the group (if still ours) and to each recorded process alive."""
        alive = self.alive(table)
        if self.group_is_ours(table):
            with contextlib.suppress(OSError):
                os.killpg(self.pid, sig)
        for pid in alive:
            if _start_time(pid) == self.known[pid]:  # checked again just before the kill
                with contextlib.suppress(OSError):
                    os.kill(pid, sig)
        return len(alive)

    def note(self, text: str) -> None:
        if self.log_path:
            with contextlib.suppress(OSError), open(self.log_path, "a") as handle:
                handle.write(f"[mopt watchdog {time.strftime('%H:%M:%S')}] {text}\n")


def reap(watched: list[Watched]) -> None:
    """SIGTERM everything recorded, wait the grace period, SIGKILL what is left."""
    table = proc_table()
    for item in watched:
        item.record(table, tags=True)
        count = item.signal(table, signal.SIGTERM)
        item.note(f"mopt ended without stopping server {item.pid}: SIGTERM to its "
                  f"{count} process(es)")
    began = time.monotonic()
    deadline = began + max(item.grace_s for item in watched)
    while time.monotonic() < deadline and any(item.alive(table) for item in watched):
        time.sleep(POLL_S)
        table = proc_table()
        for item in watched:
            item.record(table)
    killed = {id(item): 0 for item in watched}
    while time.monotonic() < deadline + KILL_ROUNDS_S:
        table = proc_table()
        for item in watched:
            item.record(table, tags=True)
            killed[id(item)] += item.signal(table, signal.SIGKILL)
        if not any(item.alive(table) for item in watched):
            break
        time.sleep(POLL_S)
    for item in watched:
        left = sorted(item.alive(proc_table()))
        item.note(f"server {item.pid}: {killed[id(item)]} SIGKILL(s); "
                  f"{'all gone' if not left else f'still running: {left}'} "
                  f"{time.monotonic() - began:.1f} s after SIGTERM")


def _apply(message: dict, watched: dict[int, Watched]) -> None:
    if "release" in message:
        watched.pop(int(message["release"]), None)
    elif "watch" in message:
        pid = int(message["watch"])
        watched[pid] = Watched(pid, int(message["start"]), float(message["grace_s"]),
                               message.get("tag"), message.get("log"))


def main() -> None:
    """The watchdog: read messages from stdin until it ends, recording; then reap."""
    for name in ("SIGINT", "SIGHUP", "SIGTERM", "SIGQUIT", "SIGTSTP", "SIGPIPE"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    os.write(1, READY)
    os.close(1)
    watched: dict[int, Watched] = {}
    pending = b""
    while True:
        ready, _, _ = select.select([0], [], [], SCAN_S if watched else None)
        if ready:
            chunk = os.read(0, 65536)
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    _apply(json.loads(line), watched)
        if watched:
            table = proc_table()
            for item in watched.values():
                item.record(table)
    if watched:
        reap(list(watched.values()))


# ---- mopt's side ----

def _line(message: dict) -> bytes:
    return (json.dumps(message) + "\n").encode()


class Watch:
    """A handle on one watched process; ``release()`` once it is stopped (idempotent)."""

    def __init__(self, owner: Watchdog | None, pid: int):
        self.owner, self.pid = owner, pid

    def release(self) -> None:
        if self.owner is not None:
            self.owner.release(self)
            self.owner = None


class Watchdog:
    """mopt's end of the watchdog: started on the first watch, closed after the last release."""

    def __init__(self, grace_s: float = DEFAULT_GRACE_S):
        self.grace_s = grace_s
        self.process: subprocess.Popen | None = None
        self._fd: int | None = None
        self._messages: dict[int, dict] = {}  # pid -> its watch message (to resend)
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        """The watchdog process's pid while it runs."""
        return self.process.pid if self.process and self.process.poll() is None else None

    def watch(self, pid: int, *, tag: str | None = None, log_path: str | os.PathLike | None = None,
              grace_s: float | None = None) -> Watch:
        """Reap ``pid``'s group and descendants if mopt dies before ``release()``.

        ``pid`` must be mopt's child, not yet waited for (its pid cannot be reused yet), and
        should lead a session or group of its own (``start_new_session``), else only it and
        its descendants are reaped. Never raises: without a watchdog, a warning is logged.
        """
        start = _start_time(pid) if HAS_PROC else None
        if start is None:
            return Watch(None, pid)
        message = {"watch": pid, "start": start, "tag": tag,
                   "grace_s": self.grace_s if grace_s is None else grace_s,
                   "log": os.fspath(log_path) if log_path else None}
        with self._lock:
            self._messages[pid] = message
            self._send(_line(message))
        return Watch(self, pid)

    def release(self, handle: Watch) -> None:
        """Stand down for ``handle``; the watchdog exits after the last release."""
        with self._lock:
            if self._messages.pop(handle.pid, None) is not None and self._fd is not None:
                try:
                    os.write(self._fd, _line({"release": handle.pid}))
                except OSError:  # the watchdog is gone: nothing to stand down
                    self._close()
            if not self._messages:
                self._close()

    def ensure(self) -> None:
        """Start a new watchdog if this one died (killed by hand, the OOM killer)."""
        with self._lock:
            if self._messages and self.pid is None:
                self._close()
                self._send(b"")

    def _send(self, data: bytes) -> None:
        for _ in range(2):  # a dead watchdog: start another one, send again
            try:
                if self._fd is None:
                    self._start()
                    data = b"".join(_line(m) for m in self._messages.values())  # all of them
                os.write(self._fd, data)
                return
            except OSError as exc:
                log.warning("the server watchdog is unavailable (%s)", exc)
                self._close()
        log.warning("no watchdog: if mopt dies now, its server may be left running")

    def _start(self) -> None:
        read_fd, write_fd = os.pipe()  # both close-on-exec (not inheritable)
        try:
            self.process = subprocess.Popen(  # noqa: S603 - argv list, no shell
                [sys.executable, "-I", "-S", os.path.abspath(__file__)], stdin=read_fd,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd="/",
                start_new_session=True, close_fds=True)
        except BaseException:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
        self._fd = write_fd
        with self.process.stdout as out:  # ready: a signal sent to it now is ignored
            ready, _, _ = select.select([out], [], [], START_TIMEOUT_S)
            if not ready or out.read(len(READY)) != READY:
                raise OSError("the watchdog did not start")

    def _close(self) -> None:
        """Close mopt's end: with nothing watched the watchdog exits at once; wait for it."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=5 if not self._messages else 0)
            self.process = None

    def _forget_in_child(self) -> None:
        """After a fork: the child must not hold the pipe open (mopt's death is the EOF)."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd, self.process, self._messages = None, None, {}
        self._lock = threading.Lock()


#: the one watchdog of this mopt process
WATCHDOG = Watchdog()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=WATCHDOG._forget_in_child)


if __name__ == "__main__":
    main()
