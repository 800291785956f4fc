"""Rollback writes only where it should, whatever a (re-sealed) archive says."""

from __future__ import annotations

import json

import pytest

from model_optimizer.archive.manifest import verify_archive, write_manifest
from model_optimizer.errors import UsageError
from model_optimizer.history.rollback import rollback

from .fakes import make_run, tiny_recipe


def _point_at(run, target):
    data = json.loads((run / "run.json").read_text())
    data["recipe_file"] = str(target)
    (run / "run.json").write_text(json.dumps(data))
    write_manifest(run)  # an edited archive, re-sealed: the manifest is not keyed


def test_an_archive_cannot_make_rollback_overwrite_another_file(tmp_path):
    recipe = tiny_recipe(tmp_path)
    run = make_run(tmp_path / "runs", recipe)
    victim = tmp_path / "other.yaml"
    victim.write_text("important: data\n")
    _point_at(run, victim)
    with pytest.raises(UsageError, match="holds no valid recipe"):
        rollback(run.name, tmp_path / "runs")
    assert victim.read_text() == "important: data\n"


def test_a_recipe_of_another_name_is_refused_unless_forced(tmp_path):
    recipe = tiny_recipe(tmp_path)
    run = make_run(tmp_path / "runs", recipe)
    other = tmp_path / "other.yaml"
    other.write_text(recipe.read_text().replace("name: tiny-cpu", "name: prod-7b"))
    _point_at(run, other)
    with pytest.raises(UsageError, match="the recipe 'prod-7b', not 'tiny-cpu'"):
        rollback(run.name, tmp_path / "runs")
    result = rollback(run.name, tmp_path / "runs", force=True)
    assert result.recipe_file == other and "name: tiny-cpu" in other.read_text()


def test_rollback_archive_goes_under_the_runs_dir_given_even_through_a_symlink(tmp_path):
    recipe = tiny_recipe(tmp_path)
    real = tmp_path / "elsewhere"
    run = make_run(real, recipe)
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / run.name).symlink_to(run, target_is_directory=True)
    result = rollback(run.name, runs)
    assert result.archive.parent == runs
    assert not any(p.name.endswith(result.archive.name[-6:]) for p in real.iterdir()
                   if p != run)


def test_a_manifest_entry_outside_the_archive_is_a_problem(tmp_path):
    run = make_run(tmp_path / "runs", tiny_recipe(tmp_path))
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["files"]["../../etc/passwd"] = {"sha256": "0" * 64, "bytes": 1}
    (run / "manifest.json").write_text(json.dumps(manifest))
    problems = verify_archive(run)
    assert [p.kind for p in problems] == ["outside_archive"]


def test_rollback_of_a_linked_recipe_updates_its_target_and_keeps_its_mode(tmp_path):
    (tmp_path / "config").mkdir()
    real = tiny_recipe(tmp_path / "config")
    real.chmod(0o640)
    link = tmp_path / "tiny.yaml"
    link.symlink_to(real)
    run = make_run(tmp_path / "runs", link, ["engine.max_num_seqs=4"])
    rollback(run.name, tmp_path / "runs")
    assert link.is_symlink() and link.resolve() == real
    assert "revision: 2" in real.read_text() and "max_num_seqs: 4" in real.read_text()
    assert real.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in (tmp_path / "config").iterdir()) == ["tiny.yaml"]
