"""Signals, handled in one place: every way a user or a system ends mopt runs its cleanup.

- ``ctrl_c_raises()``: at mopt's start, SIGINT inherited *ignored* (a background job of a
  script: the shell sets SIGINT to SIG_IGN for it) is given back Python's handler, so
  Ctrl-C and ``kill -INT`` always end a run cleanly (exit 130, archive ``interrupted``). To
  run mopt out of a terminal's reach, start it in a session of its own (``setsid``).
- ``terminate_as_interrupt()``: SIGTERM, SIGHUP (the terminal closed) and SIGQUIT (Ctrl-\\)
  raise KeyboardInterrupt like Ctrl-C, so the server is stopped and the archive finished.
- ``interrupts_deferred()``: while the server is stopped and the archive sealed, those
  signals and Ctrl-C are held and re-raised as one KeyboardInterrupt afterwards.
- ``ignore_interrupts()``: once mopt is ending on a signal, further ones are ignored.
- ``parent_death_signal()``: a ``preexec_fn`` for a child server: Linux sends it SIGTERM
  when mopt dies, even by SIGKILL (``prctl(PR_SET_PDEATHSIG)``). Elsewhere it does nothing.

SIGKILL cannot be caught, and a server may not act on the parent-death signal (vLLM ignores
it while it starts): the server's processes are reaped by mopt's watchdog
(``engine/watchdog.py``) within seconds, and the archive is marked by the next mopt command
(``model_optimizer.reaper``).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator

#: signals that end mopt the way Ctrl-C does
TERMINATING = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGQUIT")
                    if hasattr(signal, name))
_PR_SET_PDEATHSIG = 1


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _raise_interrupt(signum, frame) -> None:  # noqa: ARG001
    raise KeyboardInterrupt


def ctrl_c_raises() -> None:
    """Give SIGINT Python's handler back when mopt was started with it ignored (main thread
    only). A SIGINT left ignored would be lost: a run sent one would go on to its end."""
    if _in_main_thread() and signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def terminate_as_interrupt() -> None:
    """Make SIGTERM, SIGHUP and SIGQUIT raise KeyboardInterrupt (main thread only)."""
    if not _in_main_thread():
        return
    for sig in TERMINATING:
        signal.signal(sig, _raise_interrupt)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold off Ctrl-C and the terminating signals while cleanup runs.

    A second Ctrl-C must not leave a vLLM process or a half-written archive behind; the
    deferred signal is re-raised as KeyboardInterrupt once cleanup is done.
    """
    if not _in_main_thread():
        yield
        return
    received: list[int] = []
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, *TERMINATING)}
    for sig in previous:
        signal.signal(sig, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        raise KeyboardInterrupt


def ignore_interrupts() -> None:
    """Ignore Ctrl-C and the terminating signals from now on (main thread only): mopt is
    already ending on one, and a second or third must not print a traceback on the way out."""
    if not _in_main_thread():
        return
    for sig in (signal.SIGINT, *TERMINATING):
        signal.signal(sig, signal.SIG_IGN)


def _libc_prctl() -> Callable | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl
    except (OSError, AttributeError):
        return None


def parent_death_signal(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` that asks Linux to send ``sig`` to the child when mopt dies.

    libc is loaded here, in the parent, so the child only makes one system call. If mopt
    died between fork and prctl, the child exits at once. None where prctl is missing, and
    off the main thread: Linux sends the signal when the *thread* that started the child
    ends, so a server started by a worker thread would be stopped when that thread finished
    (mopt's watchdog covers mopt's death there).
    """
    prctl = _libc_prctl()
    if prctl is None or not _in_main_thread():
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)
    return preexec
