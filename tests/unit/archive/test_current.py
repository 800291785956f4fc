"""The current recipe: the file most recently applied, swept, tuned or rolled back in a runs
dir; omitted RECIPE arguments fall back to it."""

import json
import os
from datetime import UTC, datetime, timedelta

import pytest
from typer.testing import CliRunner

from model_optimizer.archive import index
from model_optimizer.archive.manifest import write_manifest
from model_optimizer.cli.main import app
from model_optimizer.history.current import (
    NoCurrentRecipe,
    ago,
    current_recipe,
    locate,
    require_current,
)
from model_optimizer.history.rollback import rollback

from .fakes import make_run, tiny_recipe

runner = CliRunner()


@pytest.fixture
def recipes(tmp_path):
    return tiny_recipe(tmp_path, "a.yaml"), tiny_recipe(tmp_path, "b.yaml")


def test_several_runs_the_most_recent_recipe_is_current(tmp_path, recipes):
    a, b = recipes
    runs = tmp_path / "runs"
    make_run(runs, a)
    make_run(runs, b)
    current = current_recipe(runs, cwd=tmp_path)
    assert current.path.name == "b.yaml" and current.by == "apply"
    assert current.revision == 1 and current.status == "ok"
    make_run(runs, a, ["engine.max_num_seqs=4"])  # overrides do not change which file
    assert current_recipe(runs, cwd=tmp_path).path.name == "a.yaml"


def test_a_rollback_makes_its_file_current_at_its_new_revision(tmp_path, recipes):
    a, b = recipes
    runs = tmp_path / "runs"
    first_a = make_run(runs, a)
    make_run(runs, b)
    assert current_recipe(runs, cwd=tmp_path).path.name == "b.yaml"
    rollback(first_a.name, runs)
    current = current_recipe(runs, cwd=tmp_path)
    assert (current.path.name, current.by, current.revision) == ("a.yaml", "rollback", 2)
    assert "revision 2" in current.announce() and "by rollback" in current.announce()


def test_a_deleted_file_is_passed_over_for_the_next_most_recent(tmp_path, recipes):
    a, b = recipes
    runs = tmp_path / "runs"
    make_run(runs, a)
    make_run(runs, b)
    b.unlink()
    current = current_recipe(runs, cwd=tmp_path)
    assert current.path.name == "a.yaml"
    assert current.passed_over == [str(b)]
    assert "no longer there" in current.announce()
    a.unlink()
    assert current_recipe(runs, cwd=tmp_path) is None
    with pytest.raises(NoCurrentRecipe, match="mopt init MODEL_FOLDER"):  # no recipe here
        require_current(runs, "sweep", cwd=tmp_path)
    (tmp_path / "mine.yaml").write_text("recipe_version: 1\nname: mine\n")
    with pytest.raises(NoCurrentRecipe, match="e.g. `mopt sweep mine.yaml`"):  # one here
        require_current(runs, "sweep", cwd=tmp_path)


def test_steps_and_bench_runs_do_not_count(tmp_path, recipes):
    a, b = recipes
    runs = tmp_path / "runs"
    make_run(runs, a)
    bench = make_run(runs, b)
    status = json.loads((bench / "status.json").read_text())
    (bench / "status.json").write_text(json.dumps({**status, "kind": "bench"}))
    index.refresh(runs, full=True)
    assert current_recipe(runs, cwd=tmp_path).path.name == "a.yaml"


def test_relative_paths_resolve_from_cwd_then_from_beside_the_runs_dir(tmp_path, recipes):
    a, _ = recipes
    runs = tmp_path / "runs"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert locate("a.yaml", runs, cwd=tmp_path) == a.relative_to(tmp_path)
    assert locate("a.yaml", runs, cwd=elsewhere) == a.resolve()  # beside runs/
    assert locate("gone.yaml", runs, cwd=tmp_path) is None
    assert locate(str(a), runs, cwd=elsewhere) == a.resolve()


def test_no_runs_dir_says_how_to_give_a_recipe(tmp_path):
    with pytest.raises(NoCurrentRecipe, match="holds no runs yet.*mopt apply recipes/"):
        require_current(tmp_path / "none", "apply")


def test_ago():
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    stamp = (now - timedelta(minutes=5, seconds=3)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    assert ago(stamp, now) == "5 min ago"
    assert ago("2026-11-28T11:00:00Z", now) == "2 days ago"
    assert ago(None, now) == "at an unknown time"


def test_commands_without_a_recipe_use_the_current_one(tmp_path, recipes, monkeypatch):
    a, b = recipes
    runs = tmp_path / "runs"
    make_run(runs, b)
    make_run(runs, a)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MOPT_RUNS_DIR", str(runs))
    shown = runner.invoke(app, ["show", "--json"])
    assert shown.exit_code == 0, shown.output
    assert "using a.yaml (revision 1, last used" in shown.stderr
    assert json.loads(shown.stdout)["recipe"]["name"] == "tiny-cpu"
    valid = runner.invoke(app, ["validate"])
    assert valid.exit_code == 0 and "ok  a.yaml" in valid.stdout
    os.remove(a)
    valid = runner.invoke(app, ["validate"])
    assert valid.exit_code == 0 and "ok  b.yaml" in valid.stdout, valid.output


def test_commands_without_a_recipe_or_runs_exit_2(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for command in (["apply"], ["sweep", "--param", "max_num_seqs", "--start", "8"],
                    ["tune"], ["capacity"], ["show"], ["plan"], ["validate"]):
        result = runner.invoke(app, [*command, "--runs-dir", str(tmp_path / "runs")]
                               if command[0] in ("apply", "sweep", "tune", "capacity")
                               else command)
        assert result.exit_code == 2, (command, result.output)
        assert "no current recipe" in result.output
        assert not (tmp_path / "runs").exists()


def test_capacity_uses_the_current_recipe_and_its_preflight(tmp_path, recipes, monkeypatch):
    a, _ = recipes
    runs = tmp_path / "runs"
    make_run(runs, a)
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in runs.iterdir())
    # a GPU recipe on this CPU machine: the preflight refuses it before anything starts
    result = runner.invoke(app, ["capacity", "--runs-dir", str(runs), "--set",
                                 "hardware.accelerator=H200"])
    assert result.exit_code == 2, result.output
    assert "using a.yaml" in result.output and "hardware.accelerator" in result.output
    assert sorted(p.name for p in runs.iterdir()) == before  # nothing launched or archived


def test_a_quantize_archive_counts_as_using_its_recipe(tmp_path, recipes):
    a, b = recipes
    runs = tmp_path / "runs"
    make_run(runs, a)
    quantized = make_run(runs, b)
    status = json.loads((quantized / "status.json").read_text())
    (quantized / "status.json").write_text(json.dumps({**status, "kind": "quantize"}))
    write_manifest(quantized)  # sealed again, as a quantize archive is
    index.refresh(runs, full=True)
    current = current_recipe(runs, cwd=tmp_path)
    assert (current.path.name, current.by) == ("b.yaml", "quantize")


# ----- hardening round 3: a forged archive cannot choose the current recipe ------------------
def forge(runs, recipe, finished_at, seal):
    """An archive naming ``recipe`` as used, finished at ``finished_at`` (sealed or not)."""
    folder = make_run(runs, recipe)
    status = json.loads((folder / "status.json").read_text())
    (folder / "status.json").write_text(json.dumps({**status, "finished_at": finished_at}))
    if seal:
        write_manifest(folder)
    index.refresh(runs, full=True)
    return folder


def test_an_unsealed_archive_with_a_future_time_does_not_choose_the_recipe(tmp_path, recipes):
    a, _ = recipes
    evil = tiny_recipe(tmp_path, "evil.yaml")
    runs = tmp_path / "runs"
    make_run(runs, a)
    forged = forge(runs, evil, "2099-01-01T00:00:00Z", seal=False)
    current = current_recipe(runs, cwd=tmp_path)
    assert current.path.name == "a.yaml"
    assert f"{forged.name} (dated 2099-01-01T00:00:00Z, in the future)" in current.untrusted
    assert "ignored" in current.announce()


def test_a_sealed_archive_dated_in_the_future_is_not_trusted(tmp_path, recipes):
    a, _ = recipes
    evil = tiny_recipe(tmp_path, "evil.yaml")
    runs = tmp_path / "runs"
    make_run(runs, a)
    forge(runs, evil, "2099-01-01T00:00:00Z", seal=True)
    assert current_recipe(runs, cwd=tmp_path).path.name == "a.yaml"


def test_an_edited_archive_does_not_choose_the_recipe(tmp_path, recipes):
    a, _ = recipes
    evil = tiny_recipe(tmp_path, "evil.yaml")
    runs = tmp_path / "runs"
    make_run(runs, a)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    forged = forge(runs, evil, now, seal=False)  # status.json changed after the seal
    current = current_recipe(runs, cwd=tmp_path)
    assert current.path.name == "a.yaml"
    assert current.untrusted == [f"{forged.name} (does not verify: tampered)"]


def test_a_bare_export_does_not_export_a_forged_archives_recipe(tmp_path, recipes,
                                                               monkeypatch):
    a, _ = recipes
    evil = tiny_recipe(tmp_path, "evil.yaml")
    evil.write_text(evil.read_text().replace("name: tiny-cpu", "name: evil"))
    runs = tmp_path / "runs"
    make_run(runs, a)
    forge(runs, evil, "2099-01-01T00:00:00Z", seal=False)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["export", "--runs-dir", str(runs), "--to", "out",
                                 "-f", "vllm", "--force"])
    assert "using a.yaml" in result.output, result.output
    assert "evil" not in (tmp_path / "out" / "vllm.yaml").read_text()
