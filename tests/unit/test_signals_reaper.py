"""Signals end mopt cleanly; a server outlives neither mopt nor an abandoned archive."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from model_optimizer.archive import RunArchive
from model_optimizer.engine.supervisor import OWNER_ENV, EngineProcess, owner_tag
from model_optimizer.reaper import reap_abandoned
from model_optimizer.signals import interrupts_deferred, terminate_as_interrupt

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def restore_handlers():
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP,
                                                    signal.SIGQUIT, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT])
def test_terminating_signals_raise_keyboard_interrupt(restore_handlers, sig):
    terminate_as_interrupt()
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), sig)
        time.sleep(1)


def test_sighup_during_cleanup_is_deferred_then_raised(restore_handlers):
    terminate_as_interrupt()
    done = []
    with pytest.raises(KeyboardInterrupt), interrupts_deferred():
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.2)
        done.append("cleanup finished")
    assert done == ["cleanup finished"]


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False


def test_server_dies_with_mopt_even_on_sigkill(tmp_path):
    parent = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from model_optimizer.engine.supervisor import OWNER_ENV, EngineProcess, owner_tag
        engine = EngineProcess([sys.executable, "-c", "import time; time.sleep(120)"], {{}},
                               Path({str(tmp_path / 'e.log')!r}), "http://127.0.0.1:9")
        engine.start()
        print(engine.pid, flush=True)
        time.sleep(120)
    """)
    proc = subprocess.Popen([sys.executable, "-c", parent], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        server = int(proc.stdout.readline())
        assert psutil.pid_exists(server)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert _gone(server, 10), "the server outlived a SIGKILLed mopt"
    finally:
        proc.kill()


def test_stop_never_raises_when_processes_vanish(tmp_path, monkeypatch):
    engine = EngineProcess([sys.executable, "-c", "import time; time.sleep(60)"], {},
                           tmp_path / "e.log", "http://127.0.0.1:9", grace_s=2)
    engine.start()

    def vanished(pid):
        raise ProcessLookupError(pid)
    monkeypatch.setattr(os, "getpgid", vanished)  # every process exits while being looked at
    engine.stop()
    monkeypatch.undo()
    assert _gone(engine.pid, 5)


def test_stop_falls_back_to_kill_on_an_unexpected_error(tmp_path, monkeypatch):
    from model_optimizer.engine import supervisor
    engine = EngineProcess([sys.executable, "-c", "import time; time.sleep(60)"], {},
                           tmp_path / "e.log", "http://127.0.0.1:9", grace_s=2)
    engine.start()
    monkeypatch.setattr(supervisor, "_wait_group_gone",
                        lambda *a: (_ for _ in ()).throw(RuntimeError("boom")))
    engine.stop()  # does not raise
    assert _gone(engine.pid, 5)


def _abandoned(runs: Path, server_pid: int, started: float) -> Path:
    archive = RunArchive.create(runs, "r")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    status = json.loads((archive.path / "status.json").read_text())
    status.update(pid=int(dead.stdout), server_pid=server_pid, server_started=started)
    (archive.path / "status.json").write_text(json.dumps(status))
    return archive.path


def _sleeper(owner: Path | None = None) -> subprocess.Popen:
    """A server stand-in in its own group; ``owner``: the archive that launched it."""
    env = {**os.environ, OWNER_ENV: owner_tag(owner)} if owner else None
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True, env=env)


def test_next_command_reaps_an_abandoned_server_group(tmp_path):
    folder = _abandoned(tmp_path, 0, 0.0)
    server = _sleeper(folder)
    try:
        assert reap_abandoned(tmp_path) == [folder]
        assert server.wait(timeout=15) is not None
        status = json.loads((folder / "status.json").read_text())
        assert status["status"] == "interrupted" and status["abandoned_server_stopped"]
        assert (folder / "manifest.json").is_file()
    finally:
        server.kill()


def test_reaper_never_touches_a_process_it_cannot_prove_is_its_server(tmp_path):
    server = _sleeper()  # pid and start time recorded right, but not launched by the archive
    try:
        folder = _abandoned(tmp_path, server.pid, psutil.Process(server.pid).create_time())
        assert reap_abandoned(tmp_path) == [folder]
        assert server.poll() is None  # still running: not proven ours
        assert not json.loads((folder / "status.json").read_text())["abandoned_server_stopped"]
    finally:
        server.kill()
