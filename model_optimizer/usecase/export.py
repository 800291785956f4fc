"""``mopt export`` below the command line: a recipe, or a fleet file whole, written as
deployment files (``export/``) and archived.

    result = export(Path("recipes/tiny-cpu.yaml"), Path("deploy"), ExportOptions(("vllm",)))
    result.outcome.files, result.what
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model_optimizer.archive import runs_dir
from model_optimizer.errors import EXIT_OK
from model_optimizer.export import ExportOptions, ExportOutcome, export_recipe
from model_optimizer.export.fleet_run import export_fleet
from model_optimizer.fleet import LoadedFleet, is_fleet_file, load_fleet
from model_optimizer.recipe import LoadedRecipe, Overrides, load_recipe
from model_optimizer.usecase.apply import refuse_fleet_overrides


@dataclass(frozen=True)
class ExportResult:
    """What was written where (``outcome``), and what it was: ``fleet NAME`` or ``NAME
    revision N``, as the command line names it."""

    outcome: ExportOutcome
    what: str

    @property
    def exit_code(self) -> int:
        """0: every refusal (unpinned, unvalidated, a secret in the way) raises instead."""
        return EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        """``mopt export --json``: the files, the folder, the archive, what was forced."""
        return self.outcome.to_dict()


def export(recipe: Path | LoadedRecipe | LoadedFleet, to: Path, options: ExportOptions, *,
           overrides: Overrides | None = None,
           runs_base: Path | None = None) -> ExportResult:
    """Write ``recipe`` (a recipe file with ``overrides``, a fleet file, or either loaded)
    into the folder ``to`` in ``options.formats`` and archive the export under
    ``runs_base``.

    Refused (UsageError, nothing written) unless ``options.force``: a recipe whose
    model.pins do not match the checkpoint on disk, one never validated (or not resolved),
    a hub model at a branch no commit is known for; always: a secret that would be
    written, ``overrides`` for a fleet (its instances are changed in the fleet file)."""
    base = runs_dir(runs_base)
    if isinstance(recipe, LoadedFleet) or (isinstance(recipe, Path) and is_fleet_file(recipe)):
        refuse_fleet_overrides(overrides)
        fleet = recipe if isinstance(recipe, LoadedFleet) else load_fleet(recipe)
        return ExportResult(export_fleet(fleet, to, base, options), f"fleet {fleet.name}")
    loaded = recipe if isinstance(recipe, LoadedRecipe) else load_recipe(recipe, overrides)
    return ExportResult(export_recipe(loaded, to, base, options),
                        f"{loaded.name} revision {loaded.spec.revision}")
