"""The measurement that validated a revision: what ``mopt verify`` and ``rollback --apply``
compare a new measurement with, and the workload they re-run.

A revision's ``validated.run_id`` names the archive that validated it: a run (``apply``,
or the run a rollback restored), or a search (sweep, tune; a rollback of one names it
too). The figures compared are those of the **reference** run: the run itself, or the
search's run that measured its choice (:func:`archives.chosen_step`), with its intervals
and requests; its ``run.json`` workload (the workload as it ran: concurrency filled in,
a confirmation's duration) is the one re-run. A search's ``summary.json`` noise (the CV of
the windows it read more than once) is the archived run-to-run noise.

When the archive is not under the runs dir (deleted, or another runs dir), the validated
block's own figures are compared, without intervals or requests, and the recipe's workload
is run: the result says so. An archive that is there but does not verify is refused
(:class:`archive.manifest.ArchiveError`, exit 2): figures that may have been edited are
not a reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from model_optimizer.archive.manifest import ArchiveError
from model_optimizer.archive.names import METRICS_FILE
from model_optimizer.errors import UsageError
from model_optimizer.history import archives
from model_optimizer.history.verify_rule import Evidence

SEARCH_KINDS = ("sweep", "tune", "optimize")


@dataclass
class Validation:
    """The validating measurement of a revision, as a verification compares with it."""

    run_id: str | None            # validated.run_id
    archive: Path | None          # its archive, when found under the runs dir
    reference: Path | None        # the run whose figures are compared
    evidence: Evidence            # those figures (and requests)
    workload: dict | None         # the workload to re-run (None: the recipe's own)
    archived_cv: float | None     # the validating search's run-to-run noise
    vllm_version: str | None      # where it was measured (the validated block's words)
    hardware: str | None
    note: str = ""

    def to_dict(self) -> dict:
        """JSON form."""
        return {"run_id": self.run_id, "archive": str(self.archive) if self.archive else None,
                "reference": str(self.reference) if self.reference else None,
                "workload": self.workload, "archived_cv": self.archived_cv,
                "vllm_version": self.vllm_version, "hardware": self.hardware,
                "note": self.note}


def _cv(summary: dict) -> float | None:
    noise = summary.get("noise")
    cv = noise.get("cv") if isinstance(noise, dict) else None
    if isinstance(cv, bool) or not isinstance(cv, int | float) or not math.isfinite(cv):
        return None
    return float(cv) if cv >= 0 else None


def _figures_only(validated: dict, note: str) -> Validation:
    return Validation(validated.get("run_id"), None, None,
                      Evidence(dict(validated.get("metrics") or {}), None,
                               "validated block"), None, None,
                      validated.get("vllm_version"), validated.get("hardware"), note)


def validating_measurement(validated: dict, runs_base: str | Path) -> Validation:
    """The measurement ``validated`` (a recipe's block) names, found under ``runs_base``."""
    run_id = validated.get("run_id")
    if not isinstance(run_id, str) or not run_id:
        raise UsageError("the validated block names no run_id: nothing to verify against")
    try:
        view = archives.load(run_id, runs_base)
    except ArchiveError:
        raise
    except UsageError:
        return _figures_only(validated, f"{run_id} is not under {runs_base}: compared with "
                             "the validated block's figures (no intervals) and run with "
                             "the recipe's own workload")
    reference = view if view.kind not in (*SEARCH_KINDS, "rollback") else None
    if reference is None and (step := archives.chosen_step(view)) is not None:
        reference = archives.open_archive(step)
    cv = _cv(view.summary) if view.kind in SEARCH_KINDS else None
    if reference is None:
        found = _figures_only(validated, f"{view.kind} {run_id} names no run that measured "
                              "its choice: compared with the validated block's figures")
        found.archive, found.archived_cv = view.path, cv
        return found
    workload = reference.run.get("workload")
    return Validation(run_id, view.path, reference.path,
                      Evidence(reference.json(METRICS_FILE), reference.requests(),
                               str(reference.path)),
                      workload if isinstance(workload, dict) else None, cv,
                      validated.get("vllm_version"), validated.get("hardware"))
