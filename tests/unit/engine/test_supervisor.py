"""The supervisor on real child processes (mopt's mock server, small scripts), no vLLM.

Start, health, classified start failures and timeouts, death after ready, and the stop that
must leave nothing behind: the process group, and a descendant that left it with setsid.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from model_optimizer.engine import EngineProcess, EngineStartError, free_port
from model_optimizer.engine.classify import ENGINE_DIED, KV_CACHE_TOO_SMALL, STARTUP_TIMEOUT
from model_optimizer.engine.watchdog import WATCHDOG

MOCK = [sys.executable, "-m", "model_optimizer.load.mock_server"]
KV_SMALL = ("ValueError: To serve at least one request with the model's max seq len (4096), "
            "(0.50 GiB KV cache is needed, which is larger than the available KV cache memory "
            "(0.10 GiB)")


def mock_engine(tmp_path: Path, *flags: str, timeout_s: float = 30.0,
                grace_s: float = 5.0) -> EngineProcess:
    port = free_port()
    return EngineProcess([*MOCK, "--port", str(port), *flags], {}, tmp_path / "engine.log",
                         f"http://127.0.0.1:{port}", startup_timeout_s=timeout_s,
                         grace_s=grace_s)


def core_pid(log: Path) -> int:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = re.search(r"mock engine core pid (\d+)", log.read_text())
        if found:
            return int(found.group(1))
        time.sleep(0.05)
    raise AssertionError(f"no engine core pid in {log.read_text()!r}")


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("core", ["group", "setsid"])
def test_ready_then_stop_leaves_no_process_even_one_that_left_the_group(tmp_path, core):
    engine = mock_engine(tmp_path, "--mock-engine-core", core, "--served-model-name", "m",
                         "--max-num-seqs", "4", "--enforce-eager", "--block-size", "32")
    engine.start()
    try:
        ticks = []
        ready_after = engine.wait_ready(on_tick=ticks.append, poll_s=0.05)
        assert 0 < ready_after < 30 and engine.alive()
        main_pid, child_pid = engine.pid, core_pid(engine.log_path)
        assert psutil.Process(child_pid).ppid() == main_pid
        assert (os.getpgid(child_pid) == main_pid) == (core == "group")
        dog = WATCHDOG.pid
        assert dog is not None and os.getsid(dog) == dog  # watching, out of mopt's session
    finally:
        engine.stop()
    assert not engine.alive() and WATCHDOG.pid is None and gone(dog)  # no watchdog left
    assert gone(main_pid) and gone(child_pid)
    assert engine.stop() == engine.process.returncode  # idempotent


def test_a_grandchild_that_forks_and_calls_setsid_is_killed(tmp_path):
    marker = tmp_path / "grandchild.pid"
    script = (
        "import os, time\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os.setsid()\n"
        f"    open({str(marker)!r}, 'w').write(str(os.getpid()))\n"
        "    while True: time.sleep(1)\n"
        "while True: time.sleep(1)\n")
    engine = EngineProcess([sys.executable, "-c", script], {}, tmp_path / "log",
                           "http://127.0.0.1:9", startup_timeout_s=30, grace_s=5)
    engine.start()
    try:
        deadline = time.monotonic() + 10
        while not marker.exists() or not marker.read_text():
            assert time.monotonic() < deadline
            time.sleep(0.05)
        grandchild = int(marker.read_text())
        assert os.getpgid(grandchild) == grandchild  # its own group now
        with pytest.raises(EngineStartError):  # nothing answers /health on port 9
            engine.startup_timeout_s = 0.3
            engine.wait_ready(poll_s=0.05)
    finally:
        engine.stop()
    assert gone(engine.pid) and gone(grandchild)


def test_start_failure_is_classified_from_the_log(tmp_path):
    engine = mock_engine(tmp_path, "--mock-fail-start", KV_SMALL)
    engine.start()
    try:
        with pytest.raises(EngineStartError) as caught:
            engine.wait_ready(poll_s=0.05)
    finally:
        engine.stop()
    assert caught.value.failure.kind == KV_CACHE_TOO_SMALL
    assert any("larger than the available KV cache memory" in line
               for line in caught.value.failure.evidence)
    assert caught.value.failure.returncode == 1


def test_startup_timeout(tmp_path):
    engine = mock_engine(tmp_path, "--mock-startup-s", "60", timeout_s=1.0)
    engine.start()
    started = time.monotonic()
    try:
        with pytest.raises(EngineStartError) as caught:
            engine.wait_ready(poll_s=0.05)
    finally:
        engine.stop()
    assert caught.value.failure.kind == STARTUP_TIMEOUT
    assert time.monotonic() - started < 15
    assert gone(engine.pid)


def test_death_after_ready_is_a_runtime_failure(tmp_path):
    engine = mock_engine(tmp_path, "--mock-die-after", "1", "--model", "m")
    engine.start()
    try:
        engine.wait_ready(poll_s=0.05)
        assert engine.runtime_failure() is None
        request = urllib.request.Request(f"{engine.base_url}/v1/completions",
                                         data=b'{"model": "m", "prompt": "a"}',
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(OSError):
            urllib.request.urlopen(request, timeout=10)
        engine.process.wait(timeout=10)
        failure = engine.runtime_failure()
    finally:
        engine.stop()
    assert failure is not None and failure.kind == ENGINE_DIED
    assert any("EngineDeadError" in line for line in failure.evidence)


def test_a_server_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path):
    script = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "print('up', flush=True)\nwhile True: time.sleep(1)\n")
    engine = EngineProcess([sys.executable, "-c", script], {}, tmp_path / "log",
                           "http://127.0.0.1:9", grace_s=0.5)
    engine.start()
    deadline = time.monotonic() + 10
    while "up" not in engine.log_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert engine.stop() == -signal.SIGKILL
    assert gone(engine.pid)


def test_a_server_killed_during_startup_waits_only_the_startup_grace(tmp_path):
    """vLLM's API server ignores SIGTERM while it waits for the engine core: a server that
    never answered /health is killed after ``startup_grace_s``, not the full grace."""
    script = ("import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              "print('up', flush=True)\nwhile True: time.sleep(1)\n")
    engine = EngineProcess([sys.executable, "-c", script], {}, tmp_path / "log",
                           "http://127.0.0.1:9", grace_s=60.0, startup_grace_s=0.5)
    engine.start()
    deadline = time.monotonic() + 10
    while "up" not in engine.log_text():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert engine.stop_grace_s() == 0.5
    began = time.monotonic()
    assert engine.stop() == -signal.SIGKILL
    assert time.monotonic() - began < 30  # the full 60 s grace was not waited out
    assert gone(engine.pid)


def test_a_healthy_server_gets_the_full_grace(tmp_path):
    engine = mock_engine(tmp_path, grace_s=7.0)
    assert engine.stop_grace_s() == engine.startup_grace_s  # not started, never healthy
    engine.start()
    try:
        engine.wait_ready(poll_s=0.05)
        assert engine.stop_grace_s() == 7.0
    finally:
        engine.stop()
    assert gone(engine.pid)


def test_stop_before_start_does_nothing(tmp_path):
    engine = mock_engine(tmp_path)
    assert engine.stop() is None and not engine.alive() and engine.pid is None


def test_a_ctrl_c_during_the_fork_is_raised_once_the_server_can_be_stopped(tmp_path,
                                                                           monkeypatch):
    """A Ctrl-C that lands while the server is being forked is held until the process is
    recorded, then raised: the caller's stop() finds the server (before, it was lost, or
    raised before the process was recorded and the server was left running)."""
    popen = subprocess.Popen

    def popen_hit_by_ctrl_c(*args, **kwargs):
        signal.raise_signal(signal.SIGINT)
        return popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen_hit_by_ctrl_c)
    engine = mock_engine(tmp_path, "--served-model-name", "m")
    with pytest.raises(KeyboardInterrupt):
        engine.start()
    assert engine.process is not None and engine.pid
    pid = engine.pid
    engine.stop()
    assert gone(pid)


#: a server that ignores SIGTERM (vLLM while it starts) with a child that left its group
DEAF_SERVER = "trap '' TERM; setsid sleep 600 & echo $! > {marker}; sleep 600 & wait"
MOPT_STAND_IN = """
import sys, time
from pathlib import Path
from model_optimizer.engine.supervisor import EngineProcess
engine = EngineProcess(["sh", "-c", {server!r}], {{}}, Path({log!r}), "http://127.0.0.1:9",
                       startup_grace_s=0.5)
engine.start()
print(engine.pid, flush=True)
time.sleep(600)
"""


@pytest.mark.slow  # a mopt stand-in that imports the supervisor: about 1 s
def test_a_server_deaf_to_sigterm_is_reaped_within_seconds_when_mopt_is_killed(tmp_path):
    """Issue 37: a SIGKILLed mopt left vLLM running while it started (the parent-death
    SIGTERM is not acted on then); the watchdog reaps the group and the escaped child."""
    marker = tmp_path / "escaped.pid"
    code = MOPT_STAND_IN.format(server=DEAF_SERVER.format(marker=marker),
                                log=str(tmp_path / "engine.log"))
    mopt = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    escaped = None
    try:
        server = int(mopt.stdout.readline())
        deadline = time.monotonic() + 10
        while not marker.exists() or not marker.read_text().strip():
            assert time.monotonic() < deadline
            time.sleep(0.02)
        escaped = int(marker.read_text())
        members = {p.pid for p in psutil.Process(server).children(recursive=True)}
        mopt.kill()
        mopt.wait(timeout=10)
        deadline = time.monotonic() + 10
        while not all(gone(pid) for pid in {server, escaped, *members}):
            assert time.monotonic() < deadline, "the server outlived a SIGKILLed mopt"
            time.sleep(0.05)
        assert "mopt ended without stopping server" in (tmp_path / "engine.log").read_text()
    finally:
        mopt.kill()
        for pid in (escaped,) if escaped else ():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


def test_a_server_started_by_a_thread_outlives_the_thread(tmp_path):
    """The parent-death signal fires when the *thread* that started the child ends: a
    server started by a worker thread (a fleet starting engines at once) must not get it."""
    engine = EngineProcess([sys.executable, "-c", "import time; time.sleep(60)"], {},
                           tmp_path / "log", "http://127.0.0.1:9", grace_s=1)
    worker = threading.Thread(target=engine.start)
    worker.start()
    worker.join()
    try:
        time.sleep(0.3)
        assert engine.alive(), f"stopped when its thread ended ({engine.process.returncode})"
    finally:
        engine.stop()
    assert gone(engine.pid) and WATCHDOG.pid is None
