"""Finding and reading archives for the history commands, always verified first.

A reference is a folder path (``runs/<id>``), a run id, a unique id prefix, or the short
random suffix of an id; ids are looked up in the run index (refreshed from the folders).
Every archive is verified (:func:`archive.manifest.require_intact`) before anything in it
is read, so a tampered or half-written archive is refused with the file and the problem.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from model_optimizer.archive import index
from model_optimizer.archive.manifest import require_intact
from model_optimizer.archive.names import (
    REQUESTS_FILE,
    RESOLVED_RECIPE,
    RUN_FILE,
    STATE_FILE,
    STATUS_FILE,
    STEPS_DIR,
    SUMMARY_FILE,
)
from model_optimizer.errors import UsageError


@dataclass
class ArchiveView:
    """What the history commands read from one verified archive."""

    path: Path
    id: str
    kind: str
    status: dict
    run: dict = field(default_factory=dict)        # run.json (runs, bench, rollback)
    state: dict = field(default_factory=dict)      # state.json (sweeps)
    summary: dict = field(default_factory=dict)    # summary.json (sweeps)

    @property
    def status_text(self) -> str:
        """``ok``, ``failed:<class>``, ``interrupted``."""
        return str(self.status.get("status"))

    def text(self, name: str) -> str | None:
        """A file's text, None when absent."""
        target = self.path / name
        return target.read_text(encoding="utf-8") if target.is_file() else None

    def json(self, name: str) -> dict:
        """A JSON file of the archive ({} when absent)."""
        text = self.text(name)
        return json.loads(text) if text else {}

    def requests(self) -> list[dict]:
        """Measured request records (warm-up excluded); a torn last line is skipped."""
        text = self.text(REQUESTS_FILE) or ""
        out = []
        for line in text.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not record.get("warmup"):
                out.append(record)
        return out


def resolve_ref(ref: str | Path, runs_base: str | Path) -> Path:
    """The archive folder ``ref`` names: a path, or an id / unique prefix from the index."""
    candidate = Path(ref)
    if candidate.is_dir():
        return candidate
    text = str(ref).rstrip("/")
    if "/" in text or candidate.exists():
        raise UsageError(f"{ref}: no such archive folder")
    root = Path(runs_base)
    hits = index.find(root, text)
    if not hits:
        raise UsageError(f"{ref}: no run or sweep with this id under {root}; list them with "
                         f"`mopt runs --runs-dir {root}`")
    if len(hits) > 1:
        names = ", ".join(h["id"] for h in hits[:6])
        raise UsageError(f"{ref}: ambiguous, {len(hits)} archives match ({names}); give more "
                         "of the id")
    return root / hits[0]["path"]


def open_archive(path: Path) -> ArchiveView:
    """Verify the archive at ``path`` and read its records (raises ArchiveError if broken)."""
    require_intact(path)
    status = index.read_json(path / STATUS_FILE) or {}
    view = ArchiveView(path, status.get("id") or path.name, status.get("kind") or "run", status)
    view.run = index.read_json(path / RUN_FILE) or {}
    view.state = index.read_json(path / STATE_FILE) or {}
    view.summary = index.read_json(path / SUMMARY_FILE) or {}
    return view


def load(ref: str | Path, runs_base: str | Path) -> ArchiveView:
    """Resolve ``ref`` and open (verify, read) its archive."""
    return open_archive(resolve_ref(ref, runs_base))


def effective_recipe(view: ArchiveView) -> dict | None:
    """The configuration a run measured: its resolved recipe with the workload as run."""
    text = view.text(RESOLVED_RECIPE)
    if text is None:
        return None
    resolved = yaml.safe_load(text)
    if isinstance(view.run.get("workload"), dict):
        resolved["workload"] = {**resolved.get("workload", {}), **view.run["workload"]}
    return resolved


def chosen_step(view: ArchiveView) -> Path | None:
    """The run that measured a search's choice: a sweep's chosen value (its confirmation run
    if it had one), a tune's best trial (likewise); None when the archive names none."""
    if view.kind == "tune":
        run_ids = _best_trial_runs(view.summary)
    else:
        chosen = view.summary.get("chosen") or {}
        if not chosen:
            return None
        confirmed = [c for c in view.summary.get("confirmations") or []
                     if c.get("value") == chosen.get("value") and c.get("run_id")]
        run_ids = [c["run_id"] for c in confirmed] or list(chosen.get("run_ids") or [])
    if not run_ids or not isinstance(run_ids[-1], str):
        return None
    step = view.path / STEPS_DIR / run_ids[-1]
    return step if step.is_dir() and step.parent == view.path / STEPS_DIR else None


def _best_trial_runs(summary: dict) -> list[str]:
    """A tune's best trial's runs: its confirmation launch, else the trial's own runs."""
    best = summary.get("best")
    if best is None:
        return []
    confirmed = [c["run_id"] for c in summary.get("confirmations") or []
                 if isinstance(c, dict) and c.get("number") == best and c.get("ok")
                 and c.get("run_id")]
    if confirmed:
        return confirmed
    row = next((r for r in summary.get("trials") or []
                if isinstance(r, dict) and r.get("number") == best), {})
    return str(row.get("run_ids") or "").split()
