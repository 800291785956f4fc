"""What an export refuses without ``--force``, and the hub commit it pins a model to.

An export puts a recipe in production without mopt in the loop, so it must deploy what was
measured. Each rule below is a problem ``build_deployment`` refuses unless forced (then the
archive's ``export.json`` records it under ``forced_over``):

- **drifted pins**: the checkpoint on disk differs from ``model.pins`` (``models.pins``);
- **never validated**: the recipe has no ``validated`` block (no sweep, tune or optimize
  measured this revision), or its ``validated.resolved`` is false (the measurement could
  not tell its candidates apart at its noise). A block without ``resolved`` was written
  before mopt recorded it and counts as validated;
- **an unpinned hub model**: a hub id served at a branch (``revision: main``, or none,
  which is ``main``) serves whatever the branch points to when the pod starts. The export
  pins it to the commit its validated revision measured (``model.pins.commit``), else to
  the commit the branch names (``models.pins``): from the local Hugging Face cache first
  (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``~/.cache/huggingface/hub``:
  ``models--ORG--NAME/refs/BRANCH``), which works without a network; else from the hub
  (``HF_HUB_OFFLINE`` unset, at most ``HUB_TIMEOUT_S``). When neither names a commit the
  export is refused with the fix.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from model_optimizer.models.pins import COMMIT, DEFAULT_BRANCH, cached_ref, pin_messages
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.recipe.render import model_location

#: ``(repo_id, revision) -> commit or None``: how an export finds a hub commit
CommitLookup = Callable[[str, str], str | None]


def pin_problems(loaded: LoadedRecipe) -> list[str]:
    """How the checkpoint on disk differs from ``model.pins`` (empty without pins)."""
    pins = loaded.resolved["model"].get("pins")
    if not pins:
        return []
    return [f"{problem}. Fix: re-validate the checkpoint (mopt optimize, mopt quantize)"
            for problem in pin_messages(pins, Path(model_location(loaded.spec,
                                                                  loaded.base_dir)))]


def validation_problems(loaded: LoadedRecipe) -> list[str]:
    """Why ``loaded``'s revision does not count as validated (the module docstring)."""
    validated = loaded.resolved.get("validated")
    revision = loaded.spec.revision
    if not isinstance(validated, dict) or not validated:
        return [f"revision {revision} was never validated (no validated block: nothing "
                "measured it). Fix: run mopt sweep, mopt tune or mopt optimize on it"]
    if validated.get("resolved") is False:
        return [f"revision {revision}'s validation did not resolve (validated.resolved is "
                f"false, run {validated.get('run_id')}: its candidates were within the "
                "noise). Fix: measure it again with more repeats or a longer duration_s"]
    return []


def hub_pin(loaded: LoadedRecipe, model: str, lookup: CommitLookup
            ) -> tuple[str | None, list[str]]:
    """(the commit to serve a hub ``model`` at, problems): a commit revision as written; the
    commit its validation measured (``model.pins.commit``); a branch (or none) resolved by
    ``lookup``; a refusal with the fix when none is found."""
    revision = loaded.spec.model.revision or DEFAULT_BRANCH
    if COMMIT.fullmatch(revision):
        return revision, []
    measured = (loaded.resolved["model"].get("pins") or {}).get("commit")
    commit = measured or lookup(model, revision)
    if commit:
        return commit, []
    ref = cached_ref(model, revision)
    return None, [f"model {model} is served at revision {revision!r}, a branch (what it "
                  f"serves changes when the branch moves), and no commit was found for it "
                  f"({ref} is missing and the hub did not answer). Fix: write "
                  f"model.revision: <40-hex commit>, or download the model once "
                  f"(huggingface-cli download {model} --revision {revision}) so the cache "
                  "names the commit"]
