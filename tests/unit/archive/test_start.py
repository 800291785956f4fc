"""The start files of a run archive, one function for every kind: a run or bench (argv and
environment, redacted), an eval of a recipe (headed "evaluated", no argv or environment)
and an eval of a --url alone (no recipe files)."""

from __future__ import annotations

import json

from model_optimizer.archive import RunArchive
from model_optimizer.archive.names import GIVEN_RECIPE, RESOLVED_RECIPE, RUN_FILE
from model_optimizer.archive.start import write_start
from model_optimizer.recipe import load_recipe

from .fakes import tiny_recipe

COMMON = {"id", "created_at", "recipe_file", "recipe_name", "recipe_revision", "overrides",
          "varied", "versions", "hardware"}


def started(tmp_path, loaded, extra, **how) -> tuple[RunArchive, dict]:
    archive = RunArchive.create(tmp_path / "runs", "tiny", kind="eval",
                                start=lambda new: write_start(new, loaded, extra, **how))
    return archive, json.loads((archive.path / RUN_FILE).read_text())


def test_a_run_keeps_its_argv_and_environment_redacted(tmp_path):
    loaded = load_recipe(tiny_recipe(tmp_path), ["engine.max_num_seqs=4"])
    archive, run = started(tmp_path, loaded, {"workload": {}},
                           argv=["vllm", "--api-key", "s3cret"], env={"HF_TOKEN": "hf_x"})
    assert set(run) == COMMON | {"argv", "env", "workload"}
    assert "s3cret" not in json.dumps(run) and "hf_x" not in json.dumps(run)
    assert (run["recipe_name"], run["recipe_revision"]) == ("tiny-cpu", 1)
    assert run["overrides"] == ["engine.max_num_seqs=4"] and run["varied"] == []
    assert (archive.path / RESOLVED_RECIPE).read_text().startswith(
        "# tiny-cpu as run by mopt, defaults filled in\n")


def test_an_eval_of_a_recipe_is_headed_evaluated_without_argv_or_environment(tmp_path):
    loaded = load_recipe(tiny_recipe(tmp_path))
    extra = {"kind": "eval", "quality": {}, "url": None, "baseline_run": None}
    archive, run = started(tmp_path, loaded, extra, verb="evaluated")
    assert set(run) == COMMON | set(extra)
    assert (archive.path / GIVEN_RECIPE).read_text() == loaded.source_text
    assert (archive.path / RESOLVED_RECIPE).read_text().startswith(
        "# tiny-cpu as evaluated by mopt, defaults filled in\n")


def test_an_eval_of_a_url_alone_writes_no_recipe(tmp_path):
    extra = {"kind": "eval", "quality": {}, "url": "http://h:1", "baseline_run": None}
    archive, run = started(tmp_path, None, extra, verb="evaluated")
    assert set(run) == COMMON | set(extra)
    assert (run["recipe_file"], run["recipe_name"], run["recipe_revision"],
            run["overrides"]) == ("", None, None, [])
    assert not (archive.path / GIVEN_RECIPE).exists()
    assert not (archive.path / RESOLVED_RECIPE).exists()
