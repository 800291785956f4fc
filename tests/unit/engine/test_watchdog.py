"""The watchdog on plain ``sleep`` processes: when mopt dies (SIGKILL, a kill of its whole
group, Ctrl-C to its group), the watched group, a child that called setsid and a process that
double-forked away (claimed by a tag or by writing to the server's log) are all gone within
seconds, though they ignore SIGTERM. A process not watched is untouched, and so is one the
watchdog cannot prove is the server's (out of its tree and group, untagged, not writing to its
log). A release stands the watchdog down and it exits; a killed watchdog is replaced; a fork
of mopt does not keep the watchdog waiting.

"mopt" here is a small Python process that loads ``engine/watchdog.py`` alone (it needs only
the standard library), so it starts in a fraction of a second.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from model_optimizer.engine import watchdog as watchdog_module
from model_optimizer.engine.watchdog import Watchdog

pytestmark = pytest.mark.skipif(not watchdog_module.HAS_PROC, reason="needs Linux /proc")
GRACE_S = 0.3
GONE_WITHIN_S = 10.0  # expected: the grace period and a few polls
#: the server stand-in: ignores SIGTERM (as vLLM does while it starts); a child in its group,
#: a child that called setsid, a grandchild that double-forked away (reparented at once)
ENGINE = ("trap '' TERM; sleep 600 & echo $! >> {pids}; setsid sleep 600 & echo $! >> {pids}; "
          "(setsid sleep 600 & echo $! >> {pids}) & wait")
MOPT = textwrap.dedent("""
    import importlib.util, os, signal, subprocess, sys, time
    # as mopt typed in a terminal: Ctrl-C raises (a test run in the background inherits it
    # ignored)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    spec = importlib.util.spec_from_file_location("wd", {module!r})
    wd = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(wd)
    dog = wd.WATCHDOG
    dog.grace_s = {grace}
    engine = subprocess.Popen(["sh", "-c", {engine!r}], start_new_session=True,
                              env={{**os.environ, "MOPT_TEST_TAG": "mine"}},
                              stdout=open({log!r}, "ab") if {log_stdout!r} else None)
    bystander = subprocess.Popen(["sleep", "600"], start_new_session=True)
    dog.watch(engine.pid, tag={tag!r}, log_path={log!r})
    print(engine.pid, bystander.pid, dog.pid, flush=True)
    for line in sys.stdin:
        if line.strip() == "fork" and os.fork() == 0:
            time.sleep(600)
            os._exit(0)
        if line.strip() == "kill-watchdog":
            os.kill(dog.pid, 9)
            while dog.process.poll() is None:
                time.sleep(0.01)
            dog.ensure()
        print(dog.pid, flush=True)
    time.sleep(600)
""")


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_gone(pids: set[int], within_s: float = GONE_WITHIN_S) -> set[int]:
    deadline = time.monotonic() + within_s
    while {p for p in pids if running(p)} and time.monotonic() < deadline:
        time.sleep(0.05)
    return {p for p in pids if running(p)}


def kill_all(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue


class Mopt:
    """A stand-in mopt in a session of its own: its server (``ENGINE``), a bystander it does
    not watch, its watchdog. ``send(line)`` asks it to fork or to kill its watchdog."""

    def __init__(self, tmp_path: Path, tag: str | None = None, log_stdout: bool = False):
        self.pid_file, self.log = tmp_path / "pids", tmp_path / "engine.log"
        code = MOPT.format(module=watchdog_module.__file__, grace=GRACE_S, tag=tag,
                           engine=ENGINE.format(pids=self.pid_file), log=str(self.log),
                           log_stdout=log_stdout)
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.engine, self.bystander, self.dog = map(int, self.proc.stdout.readline().split())
        deadline = time.monotonic() + 10
        while len(self.server_pids()) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(self.server_pids()) == 4, self.server_pids()
        self.children: set[int] = set()

    def written_pids(self) -> list[int]:
        """The server's child in its group, its setsid child, its double-forked grandchild."""
        text = self.pid_file.read_text() if self.pid_file.exists() else ""
        return [int(word) for word in text.split()]

    def server_pids(self) -> set[int]:
        return {self.engine, *self.written_pids()}

    def send(self, line: str) -> int:
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def cleanup(self) -> None:
        self.proc.kill()
        self.proc.wait()
        kill_all(self.server_pids() | {self.bystander, self.dog} | self.children)


@pytest.fixture
def mopt(tmp_path):
    made: list[Mopt] = []

    def make(**kwargs) -> Mopt:
        made.append(Mopt(tmp_path, **kwargs))
        return made[-1]
    yield make
    for item in made:
        item.cleanup()


@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT"])
def test_a_kill_of_mopts_group_reaps_the_server_group_and_its_setsid_child(mopt, how):
    run = mopt()
    assert running(run.dog) and os.getsid(run.dog) == run.dog  # a session of its own
    os.killpg(run.proc.pid, getattr(signal, how))  # mopt's whole group: Ctrl-C or kill -9 -g
    run.proc.wait(timeout=10)
    group_child, setsid_child, double_forked = run.written_pids()
    assert os.getsid(setsid_child) == setsid_child and os.getpgid(group_child) == run.engine
    # untagged, the double-forked one is not provably the server's: only the others must go
    assert wait_gone({run.engine, group_child, setsid_child}) == set()
    assert wait_gone({run.dog}) == set()  # the watchdog does not outlive its work
    assert running(run.bystander), "a process mopt did not watch was stopped"
    log = run.log.read_text()
    assert f"mopt ended without stopping server {run.engine}" in log and "all gone" in log


@pytest.mark.parametrize("claim", ["tag", "log"])
def test_a_process_that_double_forked_out_of_the_tree_is_claimed(mopt, claim):
    """By the tag in its environment, or by its stdout: the server's log (vLLM's engine core
    and worker overwrite their environment when they set their process title)."""
    run = mopt(tag="MOPT_TEST_TAG=mine") if claim == "tag" else mopt(log_stdout=True)
    servers = run.server_pids()
    escaped = run.written_pids()[2]  # out of the tree and the group
    assert psutil.Process(escaped).ppid() != run.engine and os.getsid(escaped) == escaped
    run.proc.kill()
    assert wait_gone(servers) == set()
    assert running(run.bystander)


def test_the_watchdog_ignores_terminal_signals_and_is_replaced_when_killed(mopt):
    run = mopt(tag="MOPT_TEST_TAG=mine")
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGQUIT):
        os.kill(run.dog, sig)
    time.sleep(0.2)
    assert running(run.dog)
    first = run.dog
    run.dog = run.send("kill-watchdog")  # SIGKILL: mopt starts another, which takes over
    assert run.dog != first and running(run.dog)
    run.proc.kill()
    assert wait_gone(run.server_pids() | {run.dog}) == set()


def test_a_fork_of_mopt_does_not_keep_the_watchdog_waiting(mopt):
    run = mopt(tag="MOPT_TEST_TAG=mine")
    run.send("fork")
    run.children = {c.pid for c in psutil.Process(run.proc.pid).children()} - {run.engine,
                                                                              run.bystander}
    assert run.children  # a forked copy of mopt, still running after mopt is gone
    run.proc.kill()
    assert wait_gone(run.server_pids()) == set()
    assert all(running(pid) for pid in run.children)


def test_a_release_stands_down_and_the_watchdog_exits(tmp_path):
    dog = Watchdog(grace_s=GRACE_S)
    first = subprocess.Popen(["sleep", "600"], start_new_session=True)
    second = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        watches = [dog.watch(first.pid), dog.watch(second.pid)]
        process = dog.process
        assert dog.pid is not None and process.poll() is None  # one watchdog for both
        watches[0].release()
        assert dog.pid == process.pid  # still watching the second
        watches[1].release()
        watches[1].release()  # idempotent
        assert dog.pid is None and process.poll() is not None  # exited, waited for
        time.sleep(GRACE_S + 0.2)
        assert first.poll() is None and second.poll() is None  # released: untouched
    finally:
        first.kill()
        second.kill()
        first.wait()
        second.wait()


def test_a_process_that_is_not_mopts_child_alive_is_not_watched():
    dead = subprocess.Popen(["true"])
    dead.wait()
    dog = Watchdog()
    handle = dog.watch(dead.pid)
    assert dog.pid is None  # nothing started for a process already gone
    handle.release()
