"""New recipe revisions: values edited in place, comments kept, validated block replaced."""

from pathlib import Path

import yaml

from model_optimizer.recipe import load_recipe, load_recipe_text
from model_optimizer.recipe.writer import write_revision

ROOT = Path(__file__).resolve().parents[3]
VALIDATED = {"at": "2026-11-29T14:00:00Z", "run_id": "sweep-1", "by": "sweep",
             "metrics": {"qps": 12.5}, "vllm_version": "0.32.0", "hardware": "cpu"}


def test_revision_keeps_comments_and_bumps(tmp_path):
    source = ROOT / "recipes" / "tiny-cpu.yaml"
    loaded = load_recipe(source)
    out = tmp_path / "next.yaml"
    text = write_revision(loaded, {("engine", "max_num_seqs"): 16}, VALIDATED, out)
    assert out.read_text() == text
    again = load_recipe(out)
    assert again.resolved["revision"] == 2
    assert again.resolved["engine"]["max_num_seqs"] == 16
    assert again.resolved["validated"] == VALIDATED
    assert "# the CPU attention backend needs a multiple of 32" in text  # comments survive
    assert text.splitlines()[0] == source.read_text().splitlines()[0]
    # a second revision replaces the validated block instead of adding another
    third = write_revision(again, {("engine", "max_num_seqs"): 12},
                           {**VALIDATED, "run_id": "sweep-2"}, tmp_path / "third.yaml")
    assert third.count("validated:") == 1
    assert yaml.safe_load(third)["validated"]["run_id"] == "sweep-2"
    assert yaml.safe_load(third)["revision"] == 3


def test_missing_keys_are_inserted_and_overrides_carried(tmp_path):
    text = ("# yaml-language-server: $schema=../schemas/recipe.v1.json\n"
            "recipe_version: 1\nname: x\nmodel:\n  path: m\nengine:\n  block_size: 32\n"
            "workload:\n  num_requests: 5\n")
    path = tmp_path / "r.yaml"
    path.write_text(text)
    loaded = load_recipe(path, ["workload.concurrency=3"])
    written = write_revision(loaded, {("engine", "max_num_seqs"): 8}, VALIDATED, path)
    doc = load_recipe_text(written).resolved
    assert doc["revision"] == 2 and doc["engine"]["max_num_seqs"] == 8
    assert doc["workload"]["concurrency"] == 3 and doc["engine"]["block_size"] == 32


def test_flow_style_falls_back_to_a_clean_document(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text("# head\nrecipe_version: 1\nname: x\nmodel: {path: m}\n"
                    "engine: {block_size: 32}\n")
    written = write_revision(load_recipe(path), {("engine", "max_num_seqs"): 4}, VALIDATED,
                             path)
    assert written.startswith("# head\n")
    doc = load_recipe_text(written).resolved
    assert doc["engine"] == {**doc["engine"], "max_num_seqs": 4, "block_size": 32}
