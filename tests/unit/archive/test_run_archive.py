"""Creating a run archive: the start files are written with Ctrl-C held."""

from __future__ import annotations

import json
import os
import signal

import pytest

from model_optimizer.archive import RunArchive


@pytest.fixture
def ctrl_c_raises():
    """Ctrl-C raises, as in a terminal (a test run in the background inherits it ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_while_the_start_files_are_written_is_held_then_marks_it_interrupted(
        tmp_path, ctrl_c_raises):
    written = []

    def start(archive: RunArchive) -> None:
        os.kill(os.getpid(), signal.SIGINT)  # arrives while the folder is half made
        archive.write_json("run.json", {"id": archive.id})
        archive.write_entry(created_at="2026-12-01T00:00:00Z", recipe_name="tiny")
        written.append(archive)

    with pytest.raises(KeyboardInterrupt):
        RunArchive.create(tmp_path, "tiny", kind="run", start=start)
    [archive] = written  # the start ran to its end before the interrupt was raised
    [folder] = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert folder == archive.path and (folder / "run.json").is_file()
    status = json.loads((folder / "status.json").read_text())
    assert status["status"] == "interrupted" and status["phase"] == "created"
    assert status["kind"] == "run"
    assert (folder / "manifest.json").is_file()  # sealed
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_without_an_interrupt_the_archive_is_running_with_its_start_files(tmp_path):
    archive = RunArchive.create(tmp_path, "tiny", kind="sweep",
                                start=lambda new: new.write_json("run.json", {"id": new.id}))
    status = archive.read_status()
    assert status["status"] == "running" and status["kind"] == "sweep"
    assert json.loads(archive.file("run.json").read_text()) == {"id": archive.id}
    assert not archive.file("manifest.json").exists()
