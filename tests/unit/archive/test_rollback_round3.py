"""Rollback findings of hardening round 3 (issue 37): a restored recipe in another folder,
pins on a rollback revision, two rollbacks at once."""

import json
import threading
import warnings
from pathlib import Path

import pytest
import yaml

from model_optimizer.errors import UsageError
from model_optimizer.history.rollback import rollback
from model_optimizer.models.pins import checkpoint_hash
from model_optimizer.recipe import load_recipe
from model_optimizer.recipe.render import model_location

from .fakes import ROOT, make_run, read_json, tree_state

MODEL = ROOT / "models" / "tiny-llama"


@pytest.fixture
def relative_recipe(tmp_path):
    """recipes/tiny.yaml naming ../models/tiny-llama and ../data/prompts.jsonl (relative)."""
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tiny-llama").symlink_to(MODEL)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "prompts.jsonl").write_text('{"prompt": "hello"}\n')
    (tmp_path / "recipes").mkdir()
    path = tmp_path / "recipes" / "tiny.yaml"
    path.write_text((ROOT / "recipes" / "tiny-cpu.yaml").read_text())
    assert "path: ../models/tiny-llama" in path.read_text()
    return path


def test_into_another_folder_relative_paths_are_rebased(tmp_path, relative_recipe):
    runs = tmp_path / "runs"
    run = make_run(runs, relative_recipe, ["workload.dataset.path=../data/prompts.jsonl"])
    target = tmp_path / "elsewhere" / "deeper" / "restored.yaml"
    target.parent.mkdir(parents=True)
    result = rollback(run.name, runs, recipe_file=target)
    restored = load_recipe(target)
    model = restored.resolved["model"]
    assert model["path"] == "../../models/tiny-llama"
    assert model_location(restored.resolved, restored.base_dir) == str(
        (tmp_path / "models" / "tiny-llama").resolve())
    assert restored.resolved["workload"]["dataset"]["path"] == "../../data/prompts.jsonl"
    assert result.rebased == {"model.path": "../../models/tiny-llama",
                              "workload.dataset.path": "../../data/prompts.jsonl"}


def test_into_the_same_file_nothing_is_rebased(tmp_path, relative_recipe):
    runs = tmp_path / "runs"
    run = make_run(runs, relative_recipe)
    result = rollback(run.name, runs)
    assert result.rebased == {}
    assert load_recipe(relative_recipe).resolved["model"]["path"] == "../models/tiny-llama"


def test_a_restored_model_folder_that_does_not_exist_is_refused(tmp_path, relative_recipe):
    runs = tmp_path / "runs"
    run = make_run(runs, relative_recipe)
    (tmp_path / "models" / "tiny-llama").unlink()  # the model is gone
    target = tmp_path / "elsewhere" / "restored.yaml"
    target.parent.mkdir()
    before = tree_state(tmp_path)
    with pytest.raises(UsageError, match="restored model.path '../models/tiny-llama' "
                                         "resolves to .*, which does not exist"):
        rollback(run.name, runs, recipe_file=target)
    assert tree_state(tmp_path) == before  # nothing written, no archive


def test_the_cli_refuses_it_with_exit_2(tmp_path, relative_recipe):
    from typer.testing import CliRunner

    from model_optimizer.cli.main import app

    runs = tmp_path / "runs"
    run = make_run(runs, relative_recipe)
    (tmp_path / "models" / "tiny-llama").unlink()
    result = CliRunner().invoke(app, ["rollback", run.name, "--runs-dir", str(runs),
                                      "--recipe", str(tmp_path / "restored.yaml")])
    assert result.exit_code == 2 and "does not exist" in result.output


def test_a_rollback_revision_pins_its_checkpoint(tmp_path, relative_recipe):
    runs = tmp_path / "runs"
    run = make_run(runs, relative_recipe)
    rollback(run.name, runs)
    pins = load_recipe(relative_recipe).resolved["model"]["pins"]
    assert pins["sha256"] == checkpoint_hash(MODEL).sha256
    assert pins["source"]["path"] == "../models/tiny-llama"


def test_a_restored_recipe_keeps_the_pins_it_was_measured_with(tmp_path, relative_recipe):
    """Pins name what was measured: a rollback does not re-pin a changed folder (drift)."""
    text = relative_recipe.read_text().replace(
        "  path: ../models/tiny-llama\n",
        "  path: ../models/tiny-llama\n  pins:\n    sha256: " + "a" * 64 + "\n")
    relative_recipe.write_text(text)
    runs = tmp_path / "runs"
    run = make_run(runs, relative_recipe)
    rollback(run.name, runs)
    assert load_recipe(relative_recipe).resolved["model"]["pins"]["sha256"] == "a" * 64


def test_two_rollbacks_at_once_write_two_revisions(tmp_path, relative_recipe, monkeypatch):
    """Both read revision 1 before either writes (held at a barrier there: the race the
    review hit 1 time in 5, every time)."""
    import model_optimizer.history.rollback as module

    runs = tmp_path / "runs"
    first = make_run(runs, relative_recipe, ["engine.max_num_seqs=2"])
    second = make_run(runs, relative_recipe, ["engine.max_num_seqs=4"])
    results, barrier = {}, threading.Barrier(2)
    opened = module._open_rollback_archive

    def open_together(*args, **kwargs):
        barrier.wait(timeout=30)  # both have read the file's revision by now
        return opened(*args, **kwargs)

    monkeypatch.setattr(module, "_open_rollback_archive", open_together)

    def restore(run):
        results[run.name] = rollback(run.name, runs)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the later writer says it wrote the next number
        threads = [threading.Thread(target=restore, args=(r,)) for r in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    written = sorted(results.values(), key=lambda r: r.revision)
    assert [(r.previous_revision, r.revision) for r in written] == [(1, 2), (2, 3)]
    assert load_recipe(relative_recipe).resolved["revision"] == 3
    # each archive records what it replaced and what it wrote, as it happened
    early, late = (r.archive for r in written)
    assert (late / "recipe.replaced.yaml").read_text() == \
        (early / "recipe.written.yaml").read_text()
    for archive, numbers in ((early, (1, 2)), (late, (2, 3))):
        run = read_json(archive / "run.json")
        assert (run["from_revision"], run["to_revision"]) == numbers
        assert yaml.safe_load((archive / "recipe.written.yaml").read_text())["revision"] \
            == numbers[1]


def test_a_sweep_landing_after_a_rollback_does_not_overwrite_it(tmp_path, relative_recipe):
    from model_optimizer.errors import RecipeWarning
    from model_optimizer.search.measure import Measurement
    from model_optimizer.search.sweep.flags import SweepFlags
    from model_optimizer.search.sweep.loop import start_sweep

    runs = tmp_path / "runs"
    run = make_run(runs, relative_recipe, ["engine.max_num_seqs=2"])
    sweep_started = load_recipe(relative_recipe, ["sweep.confirm_duration_s=0",
                                                  "sweep.max=4"])

    def measure(step, value):
        if not (runs / ".rolled").exists():  # the rollback lands while the sweep measures
            (runs / ".rolled").touch()
            rollback(run.name, runs)
        qps = {1: 4.0, 2: 7.5, 4: 13.0}.get(value, 13.5)
        return Measurement("ok", samples=[qps], slo_met=True, preemptions=0,
                           run_ids=[f"run-{value}"],
                           figures={"qps": qps, "goodput_qps": qps, "status": "ok"})

    with pytest.warns(RecipeWarning, match="already holds revision 2"):
        start_sweep(sweep_started, runs, flags=SweepFlags(start=1), measure=measure)
    assert load_recipe(relative_recipe).resolved["revision"] == 3
    texts = {json.loads((p.parent / "run.json").read_text()).get("kind")
             if (p.parent / "run.json").exists() else "sweep": p.read_text()
             for p in runs.glob("*/recipe.written.yaml")}
    assert yaml.safe_load(texts["rollback"])["revision"] == 2  # kept in its archive
    assert Path(relative_recipe).read_text() == texts["sweep"]
