"""Real vLLM: ``kill -9`` of mopt during ``apply`` and during a probe-scan ``sweep`` leaves no
vLLM process (API server, resource tracker, EngineCore, Worker) within 15 s, and the next mopt
command reaps the abandoned archives (interrupted, phase abandoned, sealed) and says so. One
test, two launches: the sweep is the apply's next command; the reaper is the sweep's. A
second test kills ``apply`` while the engine core starts (vLLM does not act on SIGTERM then):
mopt's watchdog leaves nothing within 15 s, with no next command (issue 37).

vLLM's engine core and worker set their process title, which overwrites their environment:
the test's mark cannot be read from them, so the processes are also found by the archive's
proof (``reaper.server_processes``: its ``engine.log`` as their stdout).
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from model_optimizer.engine.supervisor import OWNER_ENV
from model_optimizer.reaper import reap_abandoned, server_processes

from .conftest import TEST_MARK, TINY_RECIPE, read_jsonl, run_mopt, start_mopt, vllm_processes

# slow: not in the quick real-engine tier. Its assertions hold whatever the speed (the rules
# applied to the windows it measured; a bound with a wide margin), so it runs beside another test
pytestmark = [pytest.mark.integration, pytest.mark.slow]
CLEAN_WITHIN_S = 15.0


def _measuring(runs: Path, proc, skip: set[Path], count: int = 3, timeout: float = 400) -> Path:
    """The archive (not in ``skip``) whose load has ``count`` measured requests."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "mopt exited before its load started"
        for log in runs.rglob("requests.jsonl"):
            if log.parent not in skip and sum(
                    not r.get("warmup") for r in read_jsonl(log)) >= count:
                return log.parent
        time.sleep(0.3)
    raise AssertionError("the load did not start in time")


def _server_pids(runs: Path, mark: str) -> set[int]:
    """This test's vLLM processes: by its mark, or proven by an archive under ``runs``."""
    found = set(vllm_processes(mark))
    for log in runs.rglob("engine.log") if runs.exists() else []:
        found |= {proc.pid for proc in server_processes(log.parent)}
    return found


def _kill_and_time_clean(proc, mark: str, runs: Path, least: int = 1) -> float:
    """SIGKILL mopt; seconds until no vLLM process of this test is left (or the bound)."""
    assert len(_server_pids(runs, mark)) >= least, "expected a vLLM server"
    proc.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    proc.wait(timeout=30)
    while _server_pids(runs, mark) and time.monotonic() - killed < CLEAN_WITHIN_S + 30:
        time.sleep(0.1)
    return time.monotonic() - killed


def _tagged_processes(runs: Path) -> list[int]:
    """Processes still carrying an archive of ``runs`` as their server's proof of ownership."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.environ().get(OWNER_ENV, "").startswith(str(runs)):
                found.append(proc.info["pid"])
        except psutil.Error:
            continue
    return found


def test_kill_9_leaves_no_vllm_and_the_next_command_reaps(tiny_model, tmp_path):
    mark, runs = os.environ[TEST_MARK], tmp_path / "runs"
    recipe = tmp_path / "tiny-cpu.yaml"
    # no steady warm-up (up to 30 s before the first measured request, in the apply and again
    # in the sweep): the kill lands in the measured load either way; the steady warm-up is
    # test_apply's subject
    recipe.write_text(TINY_RECIPE.read_text().replace("../models/tiny-llama", str(tiny_model))
                      .replace("  warmup_steady_max_s: 30", "  warmup_steady_max_s: null"))
    assert "warmup_steady_max_s: null" in recipe.read_text()
    apply = start_mopt("apply", str(recipe), "--runs-dir", str(runs),
                       "--set", "workload.num_requests=100000",
                       "--set", "workload.duration_s=300", log=tmp_path / "apply.log")
    try:
        applied = _measuring(runs, apply, set())
        apply_clean_s = _kill_and_time_clean(apply, mark, runs)
    finally:
        apply.kill()
    print(f"time to clean after kill -9 of apply: {apply_clean_s:.1f} s")
    assert apply_clean_s <= CLEAN_WITHIN_S, apply_clean_s
    # SIGKILL cannot be handled: until the next command, the archive still says running
    assert json.loads((applied / "status.json").read_text())["status"] == "running"

    sweep = start_mopt("sweep", str(recipe), "--param", "max_num_seqs", "--start", "1",
                       "--growth", "4", "--max", "16", "--runs-dir", str(runs),
                       "--set", "sweep.strategy=probe-scan", "--set", "workload.duration_s=120",
                       log=tmp_path / "sweep.log")
    try:
        _measuring(runs, sweep, {applied})
        sweep_clean_s = _kill_and_time_clean(sweep, mark, runs)
    finally:
        sweep.kill()
    print(f"time to clean after kill -9 of sweep (probe-scan): {sweep_clean_s:.1f} s")
    assert sweep_clean_s <= CLEAN_WITHIN_S, sweep_clean_s
    # the sweep was the apply's next command: it reaped that archive and said so
    assert f"reaped abandoned run {applied.name}" in (tmp_path / "sweep.log").read_text()
    reaped_apply = json.loads((applied / "status.json").read_text())
    assert reaped_apply["status"] == "interrupted" and reaped_apply["phase"] == "abandoned"
    assert (applied / "manifest.json").is_file()  # sealed by the reaper

    reaped = reap_abandoned(runs)  # what the sweep's next command does first
    assert reaped and all(json.loads((p / "status.json").read_text())["status"] == "interrupted"
                          for p in reaped)
    # vLLM itself was gone already (above); what the reaper may still have stopped is a helper
    # of the server's group (Python's resource tracker): after it, none of them is left
    assert _tagged_processes(runs) == []
    listed = run_mopt("runs", "--runs-dir", str(runs), "--steps", "--json")
    assert listed.returncode == 0, listed.stderr
    statuses = {row["id"]: row["status"] for row in json.loads(listed.stdout)}
    assert statuses and not {"running", "abandoned"} & set(statuses.values()), statuses


def _engine_core_starting(runs: Path, proc, timeout: float = 400) -> Path:
    """The archive whose engine core has begun to initialise (the server not yet ready)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "mopt exited before the engine core started"
        for log in runs.rglob("engine.log") if runs.exists() else []:
            if "(EngineCore pid=" in log.read_text(errors="replace"):
                return log.parent
        time.sleep(0.1)
    raise AssertionError("the engine core did not start in time")


def _watchdog_said_all_gone(log: Path, timeout: float = 10.0) -> str:
    """The server's log once the watchdog's closing line is in it: the watchdog writes that
    line after it saw the last process gone, so a reader who saw them gone first waits."""
    deadline = time.monotonic() + timeout
    while True:
        text = log.read_text(errors="replace")
        if "all gone" in text or time.monotonic() > deadline:
            return text
        time.sleep(0.1)


def test_kill_9_while_the_engine_core_starts_leaves_nothing_without_a_next_command(
        tiny_model, tmp_path):
    mark, runs = os.environ[TEST_MARK], tmp_path / "runs"
    recipe = tmp_path / "tiny-cpu.yaml"
    recipe.write_text(TINY_RECIPE.read_text().replace("../models/tiny-llama", str(tiny_model)))
    apply = start_mopt("apply", str(recipe), "--runs-dir", str(runs),
                       log=tmp_path / "apply.log")
    try:
        archive = _engine_core_starting(runs, apply)
        # the API server, its resource tracker and the engine core at least
        clean_s = _kill_and_time_clean(apply, mark, runs, least=3)
    finally:
        apply.kill()
    log = _watchdog_said_all_gone(archive / "engine.log")
    print(f"time to clean after kill -9 of apply while the engine core starts: {clean_s:.1f} s")
    assert clean_s <= CLEAN_WITHIN_S, clean_s
    assert "Application startup complete" not in log  # killed during the start-up
    assert "[mopt watchdog" in log and "all gone" in log  # the watchdog did it, said so
    assert _tagged_processes(runs) == []
