"""Issue 37: a validated or rolled-back revision of a hub model pins the commit it measured
(the commit its branch names in the local Hugging Face cache, no network); drift names a
branch that moved since, and an export serves the commit measured."""

from __future__ import annotations

import pytest
import yaml

from model_optimizer.archive import RunArchive
from model_optimizer.export.gates import hub_pin
from model_optimizer.history.drift import DriftError, check_drift, pinned_checkpoint_messages
from model_optimizer.history.relocate import restored_pins
from model_optimizer.recipe import load_recipe
from model_optimizer.search.core.revision import write_validated_revision

HUB_MODEL = "some-org/tiny-model"
MEASURED = "0123456789abcdef0123456789abcdef01234567"
MOVED = "fedcba9876543210fedcba9876543210fedcba98"


@pytest.fixture
def refs(tmp_path, monkeypatch):
    """An offline local hub cache: ``refs(branch, commit)`` writes what a branch names."""
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def write(branch: str, commit: str) -> None:
        ref = tmp_path / "hf" / "hub" / "models--some-org--tiny-model" / "refs" / branch
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(commit + "\n")
    return write


@pytest.fixture
def recipe(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(yaml.safe_dump({
        "recipe_version": 1, "name": "r", "model": {"path": HUB_MODEL},
        "engine": {"block_size": 32, "max_num_seqs": 4},
        "hardware": {"accelerator": "H100", "count": 1}}))
    return path


def _write(path, tmp_path):
    loaded = load_recipe(path)
    archive = RunArchive.create(tmp_path / "runs", "r", kind="sweep")
    write_validated_revision(archive, loaded, {("engine", "max_num_seqs"): 8}, {"qps": 3.0},
                             by="sweep", output=path)
    archive.close()
    return load_recipe(path)


def test_a_validated_hub_revision_pins_the_commit_and_drift_names_a_moved_branch(
        recipe, tmp_path, refs):
    refs("main", MEASURED)
    written = _write(recipe, tmp_path)
    assert written.resolved["model"]["pins"] == {
        "commit": MEASURED, "source": {"path": HUB_MODEL, "revision": None}}
    assert pinned_checkpoint_messages(written.resolved, written.base_dir) == []
    assert hub_pin(written, HUB_MODEL, lambda repo, rev: MOVED) == (MEASURED, [])
    refs("main", MOVED)  # the branch moved after the measurement
    [message] = pinned_checkpoint_messages(written.resolved, written.base_dir)
    assert f"names commit {MOVED[:12]}" in message and f"measured at {MEASURED[:12]}" in message
    with pytest.raises(DriftError, match="model.pins.commit"):
        check_drift(written.resolved, strict=True, base_dir=written.base_dir)


def test_a_hub_revision_is_left_unpinned_when_the_cache_names_no_commit(recipe, tmp_path, refs):
    written = _write(recipe, tmp_path)
    assert written.resolved["model"].get("pins") is None


def test_a_rollback_revision_of_a_hub_model_pins_the_commit(recipe, tmp_path, refs):
    resolved = load_recipe(recipe).resolved
    assert restored_pins(resolved, recipe) == {}
    refs("v1", MEASURED)
    resolved["model"]["revision"] = "v1"
    assert restored_pins(resolved, recipe) == {("model", "pins"): {
        "commit": MEASURED, "source": {"path": HUB_MODEL, "revision": "v1"}}}
    resolved["model"]["pins"] = {"commit": MOVED}  # measured at another: kept as it is
    assert restored_pins(resolved, recipe) == {}
