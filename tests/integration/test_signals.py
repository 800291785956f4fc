"""Real vLLM: SIGHUP to mopt leaves no server behind, and no secret in the archive.

SIGHUP is handled like Ctrl-C (exit 130, archive interrupted). SIGKILL cannot be handled: the
parent-death signal stops the server, and the next mopt command marks the abandoned archive
interrupted (tests/integration/test_kill_orphans.py, which times it).
"""

import json
import os
import signal
import time

import psutil
import pytest

from .conftest import TINY_RECIPE, exit_code, start_mopt, wait_for_measured_requests

pytestmark = pytest.mark.integration
SECRET = "s3cr3t-Value-9f8e7d6c"


def _long_apply(runs, log):
    return start_mopt("apply", str(TINY_RECIPE), "--runs-dir", str(runs),
                      "--set", "workload.num_requests=100000",
                      "--set", "workload.duration_s=300",
                      # the signal lands in the measured load either way; the steady
                      # warm-up before it (up to 30 s) is test_apply's subject, not this one's
                      "--set", "workload.warmup_steady_max_s=null",
                      "--set", "engine.extra_args={hf-token: '${MOPT_TEST_SECRET}'}", log=log)


def _group_gone(pgid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in psutil.process_iter(["pid"])
                 if _pgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE]
        if not alive:
            return True
        time.sleep(0.3)
    return False


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def test_sighup_stops_server_and_archives_interrupted_without_secrets(tiny_model, tmp_path,
                                                                      monkeypatch):
    monkeypatch.setenv("MOPT_TEST_SECRET", SECRET)
    runs = tmp_path / "runs"
    proc = _long_apply(runs, tmp_path / "mopt.log")
    try:
        archive = wait_for_measured_requests(runs, 3, proc)
        server = json.loads((archive / "status.json").read_text())["server_pid"]
        proc.send_signal(signal.SIGHUP)
        assert exit_code(proc, tmp_path / "mopt.log", 60) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _group_gone(server, 30)
    assert json.loads((archive / "status.json").read_text())["status"] == "interrupted"
    for path in archive.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
    assert "${MOPT_TEST_SECRET}" in (archive / "run.json").read_text()
