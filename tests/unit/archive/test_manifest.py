"""Archive manifests: written last when a run is sealed; every kind of damage named."""

import json
import os
import subprocess
import sys

import pytest

from model_optimizer.archive import RunArchive
from model_optimizer.archive.manifest import (
    MANIFEST_NAME,
    ArchiveError,
    require_intact,
    verify_archive,
    write_manifest,
)

from .fakes import make_run, read_json, tiny_recipe


@pytest.fixture
def run(tmp_path):
    return make_run(tmp_path / "runs", tiny_recipe(tmp_path))


def kinds(problems):
    return [(p.file, p.kind) for p in problems]


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_sealed_run_verifies_and_lists_every_file(run):
    manifest = read_json(run / MANIFEST_NAME)
    assert manifest["manifest_format"] == 1 and manifest["archive_format"] == 1
    assert manifest["kind"] == "run" and manifest["id"] == run.name
    assert set(manifest["files"]) == {"status.json", "run.json", "recipe.given.yaml",
                                      "recipe.resolved.yaml", "requests.jsonl",
                                      "metrics.json", "report.md"}
    assert all(len(entry["sha256"]) == 64 for entry in manifest["files"].values())
    newest_other = max(p.stat().st_mtime_ns for p in run.iterdir() if p.name != MANIFEST_NAME)
    assert (run / MANIFEST_NAME).stat().st_mtime_ns >= newest_other  # written last
    assert verify_archive(run) == []
    assert require_intact(run) == run


def test_tampered_file_names_the_file_and_both_hashes(run):
    metrics = run / "metrics.json"
    data = json.loads(metrics.read_text())
    data["qps"] = 999.0
    metrics.write_text(json.dumps(data))
    [problem] = verify_archive(run)
    assert (problem.file, problem.kind) == ("metrics.json", "tampered")
    expected = read_json(run / MANIFEST_NAME)["files"]["metrics.json"]["sha256"]
    assert problem.expected == expected and problem.actual != expected
    assert "metrics.json: tampered" in problem.format()


def test_missing_manifest(run):
    (run / MANIFEST_NAME).unlink()
    assert kinds(verify_archive(run)) == [(MANIFEST_NAME, "missing_manifest")]


def test_unreadable_manifest(run):
    (run / MANIFEST_NAME).write_text("{not json")
    assert kinds(verify_archive(run)) == [(MANIFEST_NAME, "bad_manifest")]


def test_missing_and_added_files(run):
    (run / "report.md").unlink()
    (run / "notes.txt").write_text("added later")
    assert kinds(verify_archive(run)) == [("report.md", "missing_file"),
                                          ("notes.txt", "unexpected_file")]


def test_half_written_archive_with_a_dead_writer(tmp_path):
    folder = make_run(tmp_path / "runs", tiny_recipe(tmp_path), seal=False)
    status = read_json(folder / "status.json")
    assert status["status"] == "running" and not (folder / MANIFEST_NAME).exists()
    status["pid"] = dead_pid()
    (folder / "status.json").write_text(json.dumps(status))
    [problem] = verify_archive(folder)
    assert (problem.file, problem.kind) == ("status.json", "half_written")
    assert "killed" in problem.message


def test_running_archive_of_a_live_writer_is_in_progress(tmp_path):
    folder = make_run(tmp_path / "runs", tiny_recipe(tmp_path), seal=False)
    assert kinds(verify_archive(folder)) == [("status.json", "in_progress")]


def test_archive_without_status_is_half_written(tmp_path):
    folder = tmp_path / "runs" / "20260101T000000Z-x-abcdef"
    folder.mkdir(parents=True)
    (folder / "run.json").write_text("{}")
    assert kinds(verify_archive(folder)) == [("status.json", "no_status")]
    assert kinds(verify_archive(tmp_path / "nope")) == [(None, "no_archive")]


def test_archive_error_message_lists_every_problem(run):
    (run / "report.md").write_text("changed")
    (run / "run.json").unlink()
    with pytest.raises(ArchiveError) as caught:
        require_intact(run)
    text = str(caught.value)
    assert "report.md: tampered" in text and "run.json: missing file" in text
    assert "nothing was modified" in text and caught.value.exit_code == 2


def test_sweep_manifest_covers_step_manifests_not_step_files(tmp_path):
    recipe = tiny_recipe(tmp_path)
    sweep = RunArchive.create(tmp_path / "runs", "tiny-sweep", kind="sweep")
    sweep.write_json("state.json", {"history": []})
    step = make_run(sweep.path / "steps", recipe)
    sweep.set_status("ok")
    sweep.close()
    files = read_json(sweep.path / MANIFEST_NAME)["files"]
    assert f"steps/{step.name}/manifest.json" in files
    assert not any(name.startswith(f"steps/{step.name}/run") for name in files)
    assert verify_archive(sweep.path) == []
    (step / "metrics.json").write_text("{}")
    assert verify_archive(sweep.path) == []  # the step is its own archive
    assert kinds(verify_archive(sweep.path, deep=True)) == [("metrics.json", "tampered")]
    (step / MANIFEST_NAME).write_text(json.dumps({"manifest_format": 1, "files": {}}))
    assert kinds(verify_archive(sweep.path)) == [(f"steps/{step.name}/manifest.json",
                                                  "tampered")]


def test_hidden_temporary_files_are_ignored(run):
    (run / ".metrics.json.tmp").write_text("partial")
    assert verify_archive(run) == []
    write_manifest(run)
    assert ".metrics.json.tmp" not in read_json(run / MANIFEST_NAME)["files"]


def test_pid_reused_by_a_newer_process_counts_as_dead(run):
    status = read_json(run / "status.json")
    status.update({"status": "running", "pid": os.getpid(),
                   "updated_at": "2000-01-01T00:00:00.000000Z"})
    (run / "status.json").write_text(json.dumps(status))
    assert kinds(verify_archive(run)) == [("status.json", "half_written")]


def test_a_killed_sweep_is_half_written_and_says_how_to_resume(tmp_path):
    sweep = RunArchive.create(tmp_path / "runs", "tiny-sweep", kind="sweep")
    status = read_json(sweep.path / "status.json")
    status["pid"] = dead_pid()
    (sweep.path / "status.json").write_text(json.dumps(status))
    [problem] = verify_archive(sweep.path)
    assert problem.kind == "half_written"
    assert f"mopt sweep --resume {sweep.path}" in problem.message
