"""A restored recipe in its new file: relative paths rebased, the model folder checked, pins.

A recipe's relative paths start at the recipe file's folder (``model.path`` when local, the
tokenizer, the dataset, the eval set, a baseline recipe, lm-eval's include path, the
quantize calibration file and output, the pins' source). A rollback writes a run's recipe
into a file that may sit elsewhere (``--recipe``), so each relative path is rewritten
relative to the new folder (:func:`rebase_changes`) to name the same file; a restored
revision whose local model folder does not exist then is refused (:func:`require_model`).

A rollback revision is validated, so it pins what it serves (:func:`restored_pins`): the
restored recipe's own ``model.pins`` when it has them (the checkpoint that was measured:
drift names any difference from the folder now), else the SHA-256 of the local model
folder as it is when the revision is written (as a search pins its revision); for a hub id,
the commit its revision names in the local Hugging Face cache (``models.pins.hub_pins``).
"""

from __future__ import annotations

import os
from pathlib import Path

from model_optimizer.errors import UsageError
from model_optimizer.models.pins import hub_pins, served_pins
from model_optimizer.recipe.render import model_location

#: recipe fields holding a path relative to the recipe file's folder
RELATIVE_FIELDS = (("model", "tokenizer"), ("model", "pins", "source", "path"),
                   ("workload", "dataset", "path"), ("quantize", "calibration", "file"),
                   ("quantize", "output"), ("quality", "eval_set"), ("quality", "baseline"),
                   ("quality", "lm_eval", "include_path"))
BUILTIN_PREFIX = "mopt:"


def _get(document: dict, path: tuple) -> object:
    node: object = document
    for part in path:
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def _is_relative(value: object) -> bool:
    return (isinstance(value, str) and bool(value) and not value.startswith(("/", "~"))
            and not value.startswith(BUILTIN_PREFIX))


def _local_model(value: object, old_base: Path) -> bool:
    """``model.path`` names a local folder (as ``recipe.render.model_location`` decides)."""
    return _is_relative(value) and (value.startswith(".") or (old_base / value).exists())


def _rebased(value: str, old_base: Path, new_base: Path) -> str:
    return os.path.relpath(os.path.normpath(old_base / value), new_base)


def rebase_changes(document: dict, old_base: Path, new_base: Path) -> dict[tuple, str]:
    """``{field path: new value}`` for every relative path of ``document`` (as written) that
    must change to name the same file from ``new_base`` instead of ``old_base``."""
    old_base, new_base = old_base.resolve(), new_base.resolve()
    if old_base == new_base:
        return {}
    changes: dict[tuple, str] = {}
    model_path = _get(document, ("model", "path"))
    if _local_model(model_path, old_base):
        changes[("model", "path")] = _rebased(model_path, old_base, new_base)
    for field in RELATIVE_FIELDS:
        value = _get(document, field)
        if not _is_relative(value):
            continue
        if field == ("quality", "baseline") and not value.endswith((".yaml", ".yml")):
            continue  # a run reference, not a file
        if field == ("model", "tokenizer") and not _local_model(value, old_base):
            continue  # a hub id
        changes[field] = _rebased(value, old_base, new_base)
    return changes


def recorded_folder(recorded: str | None, runs_base: Path, model_path: object) -> Path | None:
    """The folder a recorded recipe file (as given when the archive was made: relative to
    where mopt ran) was in: absolute as is; relative from the current directory or from
    beside the runs dir, whichever finds the recipe's local model; None when neither does."""
    if not recorded:
        return None
    path = Path(recorded).expanduser()
    folders = [path.parent] if path.is_absolute() else [
        (Path.cwd() / path).parent, (runs_base.resolve().parent / path).parent]
    for folder in folders:
        if not _is_relative(model_path) or (folder / str(model_path)).exists():
            return folder
    return None


def require_model(resolved: dict, target: Path, source: str) -> None:
    """A UsageError (exit 2) when the revision's local model folder does not exist."""
    location = model_location(resolved, target.resolve().parent)
    if Path(location).is_absolute() and not Path(location).is_dir():
        raise UsageError(
            f"{target}: the restored model.path '{resolved['model']['path']}' resolves to "
            f"{location}, which does not exist (the recipe of {source} named it relative to "
            "its own folder); nothing was written. Roll back into a recipe file where the "
            "model is found (--recipe), or restore the model folder first.")


def restored_pins(resolved: dict, target: Path) -> dict:
    """``{("model", "pins"): pins}`` for a restored revision without pins: a local folder's
    hash, a hub id's commit in the local cache; ``{}`` when it has pins already or neither
    is found."""
    model = resolved["model"]
    pins = model.get("pins") or {}
    if pins.get("sha256") or pins.get("commit"):
        return {}
    folder = Path(model_location(resolved, target.resolve().parent))
    if not folder.is_absolute():  # a hub id
        hub = hub_pins(model["path"], model.get("revision"))
        return {} if hub is None else {("model", "pins"): hub}
    if not (folder / "config.json").is_file():
        return {}
    try:
        return {("model", "pins"): served_pins(folder, model["path"], model.get("revision"))}
    except (OSError, ValueError):
        return {}  # no weights to hash: nothing to pin
