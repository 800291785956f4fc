"""Start, watch and stop one vLLM OpenAI-compatible server as a child process group.

The server runs in a session of its own, so stopping it means signalling the whole
group: vLLM starts its engine core (``VLLM::EngineCore``) as a separate process, and an
orphaned one keeps the accelerator's memory. Stop is SIGTERM to the group, then SIGKILL
after a grace period, then a sweep of any descendant that escaped the group. Stopping never
raises: a process that exits while it is being stopped is simply gone.

The grace period is short (``startup_grace_s``) for a server that never answered
``/health``: it has nothing to drain, and vLLM 0.32's API server does not act on SIGTERM
while it waits for the engine core's ready message (a zmq poll of up to
``VLLM_ENGINE_READY_TIMEOUT_S``, 600 s), so a Ctrl-C during startup otherwise waited out
the whole grace period.

When mopt itself dies, even by SIGKILL and while vLLM starts, the server is reaped within
seconds by mopt's watchdog (``engine/watchdog.py``: the group, every descendant, every process
tagged with this server's ``OWNER_ENV``); the server also gets a parent-death SIGTERM, honoured
by vLLM once it is up. ``model_optimizer.reaper`` marks the archive on the next command.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from model_optimizer.engine.classify import (
    Failure,
    classify_runtime_failure,
    classify_start_failure,
)
from model_optimizer.engine.placement import Placement, place_server
from model_optimizer.engine.watchdog import WATCHDOG, Watch
from model_optimizer.errors import EXIT_START_FAILED, MoptError
from model_optimizer.httpcall import HTTPCallError, call, join_url
from model_optimizer.signals import interrupts_deferred, parent_death_signal

LOG_TAIL_BYTES = 256 * 1024
HEALTH_DEADLINE_S = 2.0  # total, for one /health check
#: set in the server's environment (inherited by every process it starts): the archive that
#: launched it, the proof of ownership the reaper checks before it stops anything
OWNER_ENV = "MOPT_SERVER_ARCHIVE"
log = logging.getLogger(__name__)


def owner_tag(archive_folder: str | Path) -> str:
    """The value of ``OWNER_ENV`` for servers launched by the archive at ``archive_folder``."""
    return str(Path(archive_folder).resolve())


class EngineStartError(MoptError):
    """The server did not become healthy; carries the classified failure."""

    exit_code = EXIT_START_FAILED

    def __init__(self, failure: Failure, log_path: Path):
        self.failure = failure
        self.log_path = log_path
        super().__init__(f"vLLM failed to start ({failure.summary()})\n"
                         f"  full log: {log_path}")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on ``host`` right now."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def read_tail(path: Path, max_bytes: int = LOG_TAIL_BYTES) -> str:
    """The last ``max_bytes`` of a log file as text ('' if it does not exist)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


@dataclass
class EngineProcess:
    """One vLLM server: ``start()``, ``wait_ready()``, ``stop()``; also a context manager."""

    argv: list[str]
    env_extra: dict[str, str]
    log_path: Path
    base_url: str
    startup_timeout_s: float = 600.0
    grace_s: float = 20.0
    startup_grace_s: float = 3.0
    placement: Placement | None = None
    #: the readiness path (a router answers its own: LiteLLM's ``/health/liveliness``)
    health_path: str = "/health"
    placement_seen: dict[str, list[int]] = field(default_factory=dict, init=False)
    process: subprocess.Popen | None = field(default=None, init=False)
    started_at: float | None = field(default=None, init=False)
    ready_after_s: float | None = field(default=None, init=False)
    _descendants: dict[int, psutil.Process] = field(default_factory=dict, init=False)
    _watch: Watch | None = field(default=None, init=False)

    @property
    def pid(self) -> int | None:
        """PID of the server's main process."""
        return self.process.pid if self.process else None

    def start(self) -> None:
        """Launch the server (argument list, no shell), logging to ``log_path``."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        tag = owner_tag(self.log_path.parent)  # the log lives in its archive
        env = {**os.environ, **self.env_extra, "PYTHONUNBUFFERED": "1", OWNER_ENV: tag}
        # A Ctrl-C during the fork itself would be lost (Python's at-fork handlers swallow the
        # KeyboardInterrupt: "Exception ignored in _releaseLock") or leave a server no one
        # stops: it is held until the process is recorded, then raised for the caller's stop.
        with open(self.log_path, "ab") as log, interrupts_deferred():
            self.process = subprocess.Popen(  # noqa: S603 - argv list, no shell
                self.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env=env, start_new_session=True, close_fds=True,
                preexec_fn=parent_death_signal())  # noqa: PLW1509 - one prctl call
            self.started_at = time.monotonic()
            self._watch = WATCHDOG.watch(self.process.pid, tag=f"{OWNER_ENV}={tag}",
                                         log_path=self.log_path, grace_s=self.startup_grace_s)

    def identity(self) -> dict:
        """The server's pid and start time (epoch s), so a later mopt can find this group."""
        if self.process is None:
            return {}
        try:
            created = psutil.Process(self.process.pid).create_time()
        except psutil.Error:
            created = None
        return {"server_pid": self.process.pid, "server_started": created}

    def alive(self) -> bool:
        """True while the main server process runs (and its watchdog, restarted if it died)."""
        if self._watch is not None:
            WATCHDOG.ensure()
        return self.process is not None and self.process.poll() is None

    def log_text(self) -> str:
        """Tail of the server log."""
        return read_tail(self.log_path)

    def wait_ready(self, on_tick: Callable[[float], None] | None = None,
                   poll_s: float = 0.5) -> float:
        """Block until ``/health`` answers 200; return seconds since start.

        Raises EngineStartError (classified) when the process exits first or the startup
        timeout passes. The caller still owns stopping the process.
        """
        assert self.process is not None and self.started_at is not None, "start() first"
        deadline = self.started_at + self.startup_timeout_s
        while True:
            self._remember_descendants()
            if not self.alive():
                self._drain()
                failure = classify_start_failure(self.log_text(), self.process.returncode)
                raise EngineStartError(failure, self.log_path)
            if self._healthy():
                self.ready_after_s = time.monotonic() - self.started_at
                if self.placement is not None:  # once ready: see engine/placement.py
                    self.placement_seen = place_server(self.placement, self.process.pid)
                return self.ready_after_s
            if time.monotonic() > deadline:
                failure = classify_start_failure(self.log_text(), None, timed_out=True)
                raise EngineStartError(failure, self.log_path)
            if on_tick:
                on_tick(time.monotonic() - self.started_at)
            time.sleep(poll_s)

    def _healthy(self) -> bool:
        """``/health`` answered 200 within ``HEALTH_DEADLINE_S`` in total."""
        try:
            return call("GET", join_url(self.base_url, self.health_path),
                        deadline_s=HEALTH_DEADLINE_S, max_bytes=4096).status == 200
        except HTTPCallError:
            return False

    def _drain(self, wait_s: float = 2.0) -> None:
        """Give the log a moment to receive the child's last lines."""
        with contextlib.suppress(Exception):
            self.process.wait(timeout=wait_s)

    def runtime_failure(self) -> Failure | None:
        """If the server died after becoming ready, why; else None."""
        if self.alive() or self.process is None:
            return None
        self._drain()
        return classify_runtime_failure(self.log_text(), self.process.returncode)

    def _remember_descendants(self) -> None:
        """Track children (the engine core) so none escapes stop() even if it leaves the group."""
        if not self.alive():
            return
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(self.process.pid).children(recursive=True):
                self._descendants.setdefault(child.pid, child)

    def stop(self) -> int | None:
        """Stop the whole process group: SIGTERM, wait ``grace_s``, SIGKILL. Idempotent.

        Never raises (cleanup runs in ``finally`` blocks): an unexpected error falls back
        to SIGKILL for the group and is logged.
        """
        if self.process is None:
            return None
        try:
            return self._stop()
        except Exception:  # noqa: BLE001 - cleanup must never end the caller
            log.exception("stopping the server group %s failed; killing it", self.process.pid)
            _signal_group(self.process.pid, signal.SIGKILL)
            return self.process.poll()
        finally:  # stopped: the watchdog stands down (it exits after its last watch)
            if self._watch is not None:
                self._watch.release()

    def stop_grace_s(self) -> float:
        """Seconds between SIGTERM and SIGKILL: the full grace once the server was healthy."""
        if self.ready_after_s is not None:
            return self.grace_s
        return min(self.grace_s, self.startup_grace_s)

    def _stop(self) -> int | None:
        self._remember_descendants()
        pgid = self.process.pid  # start_new_session: the group id is the leader's pid
        grace = self.stop_grace_s()
        _signal_group(pgid, signal.SIGTERM)
        try:
            self.process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            _signal_group(pgid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
        _wait_group_gone(pgid, grace)
        _kill_leftovers(self._descendants)
        return self.process.returncode

    def __enter__(self) -> EngineProcess:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pgid, sig)


def group_members(pgid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes of process group ``pgid``."""
    members = []
    for proc in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error, OSError):  # a process may exit meanwhile
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc)
    return members


def _wait_group_gone(pgid: int, grace_s: float) -> None:
    """Wait for every member of the group to exit; SIGKILL what remains after grace."""
    deadline = time.monotonic() + grace_s
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if group_members(pgid):
        _signal_group(pgid, signal.SIGKILL)
        with contextlib.suppress(psutil.Error, OSError):
            psutil.wait_procs(group_members(pgid), timeout=10)


def _kill_leftovers(processes: dict[int, psutil.Process]) -> None:
    """SIGKILL descendants that left the process group and are still running.

    psutil.Process objects remember their start time, so a reused PID is never hit.
    """
    survivors = []
    for proc in processes.values():
        with contextlib.suppress(psutil.Error, OSError):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                proc.kill()
                survivors.append(proc)
    with contextlib.suppress(psutil.Error, OSError):
        psutil.wait_procs(survivors, timeout=10)
