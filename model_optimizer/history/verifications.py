"""Verifications: the verdicts ``mopt verify`` (and ``rollback --apply``) archive, read back.

Each verification is an archive of kind ``verify`` under the runs dir (``verify.py`` writes
it): ``run.json`` names the recipe (file, name, revision, configuration hash), the validating
run it was compared with and the **environment** it was measured in (vLLM version,
hardware, GPU driver, the checkpoint's SHA-256 when the revision pins one);
``verdict.json`` holds every figure's judgement; its status is ``ok`` when the revision
held, ``failed:regressed`` when it did not, ``failed:client_bound`` when its window was
client-bound and nothing was judged (``failed:<class>`` when the measurement itself
failed). ``steps/`` holds the measured run.

``mopt status`` shows a revision's latest verification ("verified on vLLM 0.33.0 (...):
holds"); ``apply --strict`` accepts a recipe that drifted from its validated block once the
latest verification of that revision **in this environment** held.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from model_optimizer.archive import index
from model_optimizer.archive.entry import config_hash
from model_optimizer.archive.manifest import verify_archive
from model_optimizer.archive.names import RUN_FILE
from model_optimizer.history.current import last_touched

KIND = "verify"
REGRESSED_STATUS = "failed:regressed"
#: measured, but client-bound: not judged (``verify_rule.client_bound``)
CLIENT_BOUND_STATUS = "failed:client_bound"
#: what a verification's environment names, in this order
ENVIRONMENT_KEYS = ("vllm", "hardware", "driver", "checkpoint")


def describe_environment(environment: dict) -> str:
    """``vLLM 0.32.0 on Intel Xeon (driver 570.1, checkpoint 3fa2c1d4e5f6)``."""
    text = f"vLLM {environment.get('vllm') or 'unknown'}"
    if environment.get("hardware"):
        text += f" on {environment['hardware']}"
    extra = [f"driver {environment['driver']}"] if environment.get("driver") else []
    if environment.get("checkpoint"):
        extra.append(f"checkpoint {str(environment['checkpoint'])[:12]}")
    return text + (f" ({', '.join(extra)})" if extra else "")


@dataclass(frozen=True)
class Verification:
    """One archived verification of one revision."""

    id: str
    path: Path
    at: str
    recipe_name: str | None
    revision: int | None
    recipe_hash: str | None
    status: str
    environment: dict
    validated_run_id: str | None

    @property
    def holds(self) -> bool:
        """The revision held."""
        return self.status == "ok"

    @property
    def word(self) -> str:
        """``holds``, ``regressed``, ``not judged: client-bound``, or the failed
        measurement's status."""
        if self.status == CLIENT_BOUND_STATUS:
            return "not judged: client-bound"
        return "holds" if self.holds else "regressed" if self.status == REGRESSED_STATUS \
            else self.status

    def line(self) -> str:
        """``verified on vLLM 0.33.0 on <hw>: holds (20261204T...-tiny-verify-1a2b3c)``."""
        return f"verified on {describe_environment(self.environment)}: {self.word} ({self.id})"

    def to_dict(self) -> dict:
        """JSON form."""
        return {"id": self.id, "path": str(self.path), "at": self.at,
                "recipe_name": self.recipe_name, "revision": self.revision,
                "status": self.status, "verdict": self.word, "environment": self.environment,
                "validated_run_id": self.validated_run_id}


def _record(row: dict, root: Path) -> Verification | None:
    folder = root / row["path"]
    if verify_archive(folder):
        return None  # unsealed or edited: not a verdict
    run = index.read_json(folder / RUN_FILE) or {}
    environment = run.get("environment") if isinstance(run.get("environment"), dict) else {}
    return Verification(row["id"], folder, last_touched(row), row.get("recipe_name"),
                        row.get("recipe_revision"), row.get("recipe_hash"),
                        index.shown_status(row),
                        {k: environment.get(k) for k in ENVIRONMENT_KEYS},
                        run.get("validated_run_id"))


def verifications(root: str | Path, recipe_name: str | None = None) -> list[Verification]:
    """Sealed verifications under ``root`` (of recipe ``recipe_name``), newest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    rows = [r for r in index.all_rows(root) if r.get("kind") == KIND and not r.get("parent")
            and r.get("status") != "running"
            and (recipe_name is None or r.get("recipe_name") == recipe_name)]
    rows.sort(key=lambda r: (last_touched(r), r["id"]), reverse=True)
    found = (_record(row, root) for row in rows)
    return [record for record in found if record is not None]


def of_revision(records: list[Verification], resolved: dict) -> list[Verification]:
    """The verifications of exactly this revision and configuration, newest first."""
    digest = config_hash(resolved)
    return [r for r in records if r.revision == resolved.get("revision")
            and r.recipe_hash == digest]


def latest_here(root: str | Path, resolved: dict, environment: dict) -> Verification | None:
    """The newest verification of this revision in ``environment`` (every key equal), the
    one that decides whether ``apply --strict`` accepts a drifted recipe; None when none."""
    for record in of_revision(verifications(root, resolved.get("name")), resolved):
        if all(record.environment.get(k) == environment.get(k) for k in ENVIRONMENT_KEYS):
            return record
    return None
