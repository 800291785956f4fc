"""The reaper after a SIGKILLed mopt: it stops every process of the archive's server (an
orphaned engine core too), acts only on processes proven to be that server, never writes
through a linked archive, and seals an archive killed between its final status and manifest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from model_optimizer.archive import RunArchive
from model_optimizer.archive.manifest import verify_archive
from model_optimizer.engine.supervisor import OWNER_ENV
from model_optimizer.reaper import reap_abandoned, server_processes

ROOT = Path(__file__).resolve().parents[2]
KILLED_RUN = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from model_optimizer.engine.factory import MockEngine
from model_optimizer.runner import run_recipe
from unit.mock_engine import mock_recipe

loaded = mock_recipe(Path({folder!r}), Path({model!r}), overrides=["workload.num_requests=9999"])
def on_event(event):
    if event.kind in ("archive", "load"):
        print(event.kind, getattr(event, "path", ""), flush=True)
run_recipe(loaded, {runs!r}, on_event=on_event,
           engine_factory=MockEngine(ttft_ms=50, itl_ms=20, engine_core="group"))
"""


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


def _forge(folder: Path, **fields) -> None:
    folder.mkdir(parents=True)
    status = {"status": "running", "pid": _dead_pid(), "id": folder.name, **fields}
    (folder / "status.json").write_text(json.dumps(status))


def _wait_gone(processes: list[psutil.Process], timeout: float) -> bool:
    _, alive = psutil.wait_procs(processes, timeout=timeout)
    return not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE]


@pytest.mark.slow  # several seconds: real processes (quick tier: not slow)
def test_an_engine_core_orphaned_by_sigkill_is_found_and_stopped(tmp_path, tiny_model_dir):
    runs = tmp_path / "runs"
    script = KILLED_RUN.format(tests=str(ROOT / "tests"), folder=str(tmp_path),
                               model=str(tiny_model_dir), runs=str(runs))
    mopt = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        archive = Path(mopt.stdout.readline().split()[1])
        assert mopt.stdout.readline().startswith("load")
        # mopt and its watchdog killed together (an OOM kill of the whole job, power loss):
        # the watchdog, frozen first so mopt cannot replace it, is killed after mopt
        watchdog = [child for child in psutil.Process(mopt.pid).children()
                    if "watchdog.py" in " ".join(child.cmdline())]
        assert len(watchdog) == 1
        watchdog[0].suspend()
        mopt.send_signal(signal.SIGKILL)
        mopt.wait(timeout=10)
        watchdog[0].kill()
        time.sleep(1.0)  # the parent-death signal ends the server's main process only
        orphans = server_processes(archive)
        assert orphans, "expected the engine core stand-in to outlive the SIGKILLed mopt"
        assert reap_abandoned(runs) == [archive]
        assert _wait_gone(orphans, 15)
        assert not server_processes(archive)
        status = json.loads((archive / "status.json").read_text())
        assert status["status"] == "interrupted" and status["abandoned_server_stopped"]
        assert status["abandoned_processes_stopped"] >= 1
        assert verify_archive(archive) == []
        assert reap_abandoned(runs) == []  # the next command finds nothing abandoned
    finally:
        mopt.kill()
        for proc in server_processes(archive) if "archive" in locals() else []:
            proc.kill()


@pytest.fixture
def victim():
    """An unrelated process in a session of its own (``setsid sleep``)."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                            start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def test_a_forged_status_never_gets_an_unrelated_group_killed(tmp_path, victim):
    runs = tmp_path / "runs"
    folder = runs / "20260101T000000Z-forged-abcdef"
    started = psutil.Process(victim.pid).create_time()
    _forge(folder, server_pid=victim.pid, server_started=started,
           server_owner=str(folder.resolve()))
    assert reap_abandoned(runs) == [folder]
    time.sleep(0.3)
    assert victim.poll() is None
    assert json.loads((folder / "status.json").read_text())["abandoned_server_stopped"] is False


def test_a_forged_tag_of_another_archive_is_not_proof(tmp_path):
    runs = tmp_path / "runs"
    other = tmp_path / "elsewhere" / "run"
    env = {**os.environ, OWNER_ENV: str(other.resolve())}
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        _forge(runs / "forged", server_pid=proc.pid)
        assert reap_abandoned(runs) == [runs / "forged"]
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_a_linked_archive_is_neither_followed_nor_written(tmp_path, victim):
    runs, target = tmp_path / "runs", tmp_path / "outside" / "real"
    env = {**os.environ, OWNER_ENV: str(target.resolve())}
    tagged = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)
    try:
        _forge(target, server_pid=victim.pid)
        before = (target / "status.json").read_bytes()
        runs.mkdir()
        (runs / "linked").symlink_to(target, target_is_directory=True)
        assert reap_abandoned(runs) == []
        assert (target / "status.json").read_bytes() == before
        assert sorted(p.name for p in target.parent.iterdir()) == ["real"]
        assert sorted(p.name for p in target.iterdir()) == ["status.json"]
        assert tagged.poll() is None and victim.poll() is None
    finally:
        tagged.kill()
        tagged.wait()


def test_a_linked_status_file_is_not_followed(tmp_path):
    runs, outside = tmp_path / "runs", tmp_path / "outside.json"
    outside.write_text(json.dumps({"status": "running", "pid": _dead_pid()}))
    (runs / "r").mkdir(parents=True)
    (runs / "r" / "status.json").symlink_to(outside)
    before = outside.read_bytes()
    assert reap_abandoned(runs) == []
    assert outside.read_bytes() == before and not (runs / "r" / "manifest.json").exists()


KILLED_BEFORE_SEAL = """
import os, signal, sys
from model_optimizer.archive import RunArchive, index
archive = RunArchive.create({runs!r}, "r")
archive.write_json("metrics.json", {{"completed": 3}})
index.seal = lambda path: os.kill(os.getpid(), signal.SIGKILL)  # killed right before sealing
archive.set_status("ok", phase="finished")
print(archive.path, flush=True)
archive.close()
"""


def test_a_kill_between_final_status_and_manifest_is_sealed_by_the_next_command(tmp_path):
    runs = tmp_path / "runs"
    done = subprocess.run([sys.executable, "-c", KILLED_BEFORE_SEAL.format(runs=str(runs))],
                          capture_output=True, text=True, env={**os.environ,
                                                               "PYTHONPATH": str(ROOT)})
    assert done.returncode == -signal.SIGKILL
    archive = Path(done.stdout.strip())
    assert not (archive / "manifest.json").exists()
    assert [p.kind for p in verify_archive(archive)] == ["missing_manifest"]
    assert reap_abandoned(runs) == []  # nothing was abandoned: it had finished
    assert verify_archive(archive) == []
    assert json.loads((archive / "status.json").read_text())["status"] == "ok"


def test_a_finished_archive_of_a_live_writer_is_left_to_it(tmp_path):
    archive = RunArchive.create(tmp_path, "r")
    archive.set_status("ok")  # this process still runs: it will seal the archive itself
    reap_abandoned(tmp_path)
    assert not (archive.path / "manifest.json").exists()


RETITLED = ("import setproctitle, time\n"
            "setproctitle.setproctitle('VLLM::EngineCore')  # overwrites /proc/<pid>/environ\n"
            "print('retitled', flush=True)\n"
            "time.sleep(60)\n")


def _retitled(log: Path, env: dict | None = None) -> subprocess.Popen:
    """A process that sets its title as vLLM's engine core does, writing to ``log``."""
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-c", RETITLED], stdout=out, env=env,
                                start_new_session=True)
    deadline = time.monotonic() + 10
    while "retitled" not in log.read_text():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.02)
    return proc


def test_an_engine_core_whose_environment_was_overwritten_is_found_by_its_log(tmp_path):
    """vLLM's engine core and worker set their process title, which wipes the environment
    the tag lives in; the archive's log, inherited as stdout, still proves them its own."""
    runs = tmp_path / "runs"
    folder = runs / "20260101T000000Z-retitled-abcdef"
    _forge(folder)
    core = _retitled(folder / "engine.log", {**os.environ, OWNER_ENV: str(folder.resolve())})
    try:
        assert OWNER_ENV not in psutil.Process(core.pid).environ()  # the tag is unreadable
        assert [p.pid for p in server_processes(folder)] == [core.pid]
        assert reap_abandoned(runs) == [folder]
        assert core.wait(timeout=15) is not None
    finally:
        core.kill()
        core.wait()


@pytest.mark.parametrize("link", ["hard", "symbolic"])
def test_a_log_linked_to_another_programs_output_is_not_proof(tmp_path, link):
    runs, output = tmp_path / "runs", tmp_path / "someone-elses.log"
    folder = runs / "20260101T000000Z-forged-abcdef"
    _forge(folder)
    output.write_text("")
    other = _retitled(output)
    try:
        if link == "hard":
            os.link(output, folder / "engine.log")
        else:
            (folder / "engine.log").symlink_to(output)
        assert server_processes(folder) == []
        assert reap_abandoned(runs) == [folder]
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()
