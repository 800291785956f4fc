"""``mopt rollback runs/<id>``: make an earlier state the current revision again.

A run's rollback restores the recipe the run *ran*: its ``recipe.given.yaml`` with the
``--set`` overrides recorded in ``run.json``. A sweep's (or tune's) rollback restores the
recipe it *wrote* (``recipe.written.yaml``). Either way the target recipe file (``recipe_file``
of the run, the sweep's output, or ``--recipe``) gets it as a **new** revision, current
revision + 1, whose ``validated`` block says ``by: rollback`` and ``rollback_of: <id>`` and
carries the figures, vLLM version and hardware of the restored measurement (``at`` is when
that measurement finished). History is appended, never rewritten: a small archive of kind
``rollback`` records ``recipe.replaced.yaml`` (the file as it was, read under the writer's
lock) and ``recipe.written.yaml``. The number is taken under that lock (``recipe/writer.py``): two
rollbacks at once write two revisions, never one number twice.

Into another file (``--recipe``) the restored recipe's relative paths are rebased to its
folder, and a local model folder that does not exist there is refused before anything is
written (:mod:`.relocate`); the revision pins the checkpoint it serves.

``--apply`` re-measures the restored revision with ``mopt verify``'s core
(``model_optimizer/verify.py``): the same workload as the restored measurement, judged by
the one verification rule (:mod:`.verify_rule`), the noise and not a fixed tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from model_optimizer.archive import RunArchive, failed_status, utc_now
from model_optimizer.archive.entry import revision_fields
from model_optimizer.archive.index import read_json
from model_optimizer.archive.names import (
    GIVEN_RECIPE,
    METRICS_FILE,
    REPLACED_RECIPE,
    RUN_FILE,
    WRITTEN_RECIPE,
)
from model_optimizer.errors import RecipeError, UsageError
from model_optimizer.history import archives
from model_optimizer.history.relocate import (
    rebase_changes,
    recorded_folder,
    require_model,
    restored_pins,
)
from model_optimizer.load.figures import FIGURE_KEYS
from model_optimizer.recipe import Variation, archived_overrides, load_recipe, load_recipe_text
from model_optimizer.recipe.writer import write_revision
from model_optimizer.telemetry import hardware_label


@dataclass
class Restore:
    """What a rollback puts back: recipe text, overrides, the validated block, the reference."""

    text: str
    overrides: list[str | Variation]  # the run's --set texts, then the values mopt varied
    validated: dict
    default_file: str | None
    reference: Path | None   # the run archive whose figures are restored


@dataclass
class RollbackResult:
    """Where the restored revision went and how to find its history."""

    source: str
    source_kind: str
    recipe_file: Path
    previous_revision: int | None
    revision: int
    archive: Path
    reference: Path | None
    text: str
    archived_metrics: dict = field(default_factory=dict)
    rebased: dict = field(default_factory=dict)   # field -> new relative path

    def to_dict(self) -> dict:
        """JSON form."""
        return {"rollback_of": self.source, "source_kind": self.source_kind,
                "recipe_file": str(self.recipe_file),
                "previous_revision": self.previous_revision, "revision": self.revision,
                "archive": str(self.archive),
                "reference": str(self.reference) if self.reference else None,
                "rebased": self.rebased}


# ----- what to restore ------------------------------------------------------------------------
def _numeric(figures: dict) -> dict:
    return {k: figures.get(k) for k in FIGURE_KEYS
            if isinstance(figures.get(k), int | float) and not isinstance(figures.get(k), bool)}


def _restore_run(view: archives.ArchiveView) -> Restore:
    if view.kind != "run":
        raise UsageError(f"{view.path}: a {view.kind} archive holds no recipe to restore; "
                         "roll back to a run or a sweep")
    if view.status_text != "ok":
        raise UsageError(f"{view.path}: this run ended '{view.status_text}', so its recipe "
                         "was never validated; roll back to a run that finished ok")
    text = view.text(GIVEN_RECIPE)
    if text is None:
        raise UsageError(f"{view.path}: no recipe.given.yaml in this run")
    hardware = view.run.get("hardware")
    validated = {"at": view.status.get("finished_at") or view.run.get("created_at")
                 or utc_now(), "run_id": view.id, "by": "rollback", "rollback_of": view.id,
                 "metrics": _numeric(view.json(METRICS_FILE)),
                 "vllm_version": (view.run.get("versions") or {}).get("vllm"),
                 "hardware": hardware_label(hardware)}
    driver = hardware.get("gpu_driver_version") if isinstance(hardware, dict) else None
    if isinstance(driver, str) and driver:
        validated["driver"] = driver
    return Restore(text, archived_overrides(view.run.get("overrides"), view.run.get("varied")),
                   validated,
                   view.run.get("recipe_file") or None, view.path)


def _restore_search(view: archives.ArchiveView) -> Restore:
    text = view.text(WRITTEN_RECIPE)
    if text is None:
        raise UsageError(f"{view.path}: this {view.kind} wrote no recipe revision "
                         f"({view.status_text}); roll back to one of its step runs under "
                         f"{view.path / 'steps'} instead")
    written = yaml.safe_load(text) or {}
    validated = {**(written.get("validated") or {}), "run_id": view.id, "by": "rollback",
                 "rollback_of": view.id}
    validated.setdefault("at", view.status.get("finished_at") or utc_now())
    return Restore(text, [], validated, view.state.get("output") or
                   view.state.get("recipe_file"), archives.chosen_step(view))


def _current(target: Path) -> tuple[str | None, int | None]:
    """The target file's text and revision (None, None when it does not exist)."""
    if not target.is_file():
        return None, None
    text = target.read_text(encoding="utf-8")
    try:
        return text, load_recipe(target).resolved["revision"]
    except RecipeError:
        document = yaml.safe_load(text) if text.strip() else None
        revision = document.get("revision", 1) if isinstance(document, dict) else None
        if not isinstance(revision, int):
            raise UsageError(f"{target}: cannot tell this file's revision; fix it or roll "
                             "back into another file with --recipe") from None
        return text, revision


# ----- the rollback ----------------------------------------------------------------------------
def rollback(ref: str | Path, runs_base: str | Path,
             recipe_file: str | Path | None = None, force: bool = False) -> RollbackResult:
    """Restore the recipe of run or sweep ``ref`` as a new revision of its recipe file.

    The target must be a recipe of the same name (``force`` skips that check): an archive,
    which can be edited and re-sealed, may not make mopt overwrite an arbitrary file. The
    rollback archive always goes under ``runs_base``.
    """
    view = archives.load(ref, runs_base)
    restore = _restore_search(view) if view.kind in ("sweep", "tune") else _restore_run(view)
    target_name = str(recipe_file or restore.default_file or "")
    if not target_name:
        raise UsageError(f"{view.path}: the archive does not name its recipe file; give "
                         "--recipe FILE")
    target = Path(target_name)
    if recipe_file is None and not target.is_file():
        raise UsageError(f"{view.path} was made from {target}, which does not exist here "
                         "(a relative path is relative to where mopt ran); give the recipe "
                         "file to roll back with --recipe FILE")
    base = load_recipe_text(restore.text, str(target), restore.overrides)
    if not force:
        _check_target(target, base.name)
    changes = _relocated(base, restore, Path(runs_base), target, view.id)
    current_text, current_revision = _current(target)
    base_revision = current_revision if current_revision is not None else \
        base.resolved["revision"]
    loaded = load_recipe_text(restore.text, str(target),
                              [*restore.overrides,
                               Variation("revision", base_revision, "rollback")])
    archive = _open_rollback_archive(view, runs_base, loaded.name, target,
                                     current_revision, base_revision + 1)
    text, previous, revision = _write(archive, loaded, changes, restore.validated, target)
    return RollbackResult(view.id, view.kind, target, previous, revision, archive.path,
                          restore.reference, text,
                          dict(restore.validated.get("metrics") or {}),
                          {".".join(k): v for k, v in changes.items()
                           if k != ("model", "pins")})


def _relocated(base, restore: Restore, runs_base: Path, target: Path, source: str) -> dict:
    """The changes a restored recipe needs in ``target``: its relative paths rebased from
    the folder of the file it was made from, and pins; refused (UsageError) when its local
    model folder does not exist there."""
    model_path = base.document.get("model", {}).get("path")
    old_base = recorded_folder(restore.default_file, runs_base, model_path)
    changes = rebase_changes(base.document, old_base, target.parent) if old_base else {}
    resolved = _with(base.resolved, changes)
    require_model(resolved, target, source)
    return {**changes, **restored_pins(resolved, target)}


def _with(resolved: dict, changes: dict[tuple, object]) -> dict:
    """A copy of ``resolved`` with ``changes`` set."""
    import copy

    out = copy.deepcopy(resolved)
    for path, value in changes.items():
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return out


def _check_target(target: Path, name: str) -> None:
    """A file that exists must be a recipe named ``name``; UsageError otherwise."""
    if not target.exists():
        return
    try:
        found = load_recipe(target).name
    except RecipeError:
        found = None
    if found != name:
        what = f"the recipe '{found}'" if found else "no valid recipe"
        raise UsageError(f"{target} holds {what}, not '{name}': mopt will not overwrite it "
                         "(an archive names this file); give the right file with --recipe, "
                         "or --force")


def _open_rollback_archive(view: archives.ArchiveView, runs_base: str | Path, name: str,
                           target: Path, current_revision: int | None,
                           revision: int) -> RunArchive:
    def start(archive: RunArchive) -> None:
        created_at = utc_now()
        archive.write_json(RUN_FILE, {
            "id": archive.id, "created_at": created_at, "kind": "rollback",
            "recipe_name": name, "recipe_file": str(target), "rollback_of": view.id,
            "source_kind": view.kind, "source_path": str(view.path),
            "from_revision": current_revision, "to_revision": revision})
        archive.write_entry(created_at=created_at, recipe_name=name,
                            recipe_revision=revision, recipe_file=str(target))
    return RunArchive.create(runs_base, f"{name}-rollback", kind="rollback", start=start)


def _write(archive: RunArchive, loaded, changes: dict, validated: dict,
           target: Path) -> tuple[str, int | None, int]:
    """Write the revision (the replaced file archived under the writer's lock), record the
    numbers as written (another mopt may have written one in between) and seal; returns the
    text, the replaced revision (None: a new file) and the written one."""
    replaced: list[str] = []

    def keep_replaced(previous: str | None) -> None:
        if previous is not None:
            replaced.append(previous)
            archive.write_text(REPLACED_RECIPE, previous)

    try:
        text = write_revision(loaded, changes, validated, target, before_write=keep_replaced)
    except BaseException as exc:
        archive.set_status(failed_status("not_written"), phase="finished",
                           finished_at=utc_now(), error=str(exc))
        archive.close()
        raise
    written = (yaml.safe_load(text) or {}).get("revision", 1)
    previous = written - 1 if replaced else None
    run = read_json(archive.file(RUN_FILE)) or {}
    if (run.get("from_revision"), run.get("to_revision")) != (previous, written):
        archive.write_json(RUN_FILE, {**run, "from_revision": previous,
                                      "to_revision": written})
    archive.write_text(WRITTEN_RECIPE, text)
    archive.write_entry(**revision_fields(text))
    archive.set_status("ok", phase="finished", finished_at=utc_now())
    archive.close()
    return text, previous, written
