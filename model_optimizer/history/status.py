"""``mopt status``: where am I. The current recipe of a runs dir, the figures that validated
its revision, how this machine differs from where they were measured (drift: vLLM,
hardware, GPU driver, the pinned checkpoint's files), the latest verification of the
revision (``mopt verify``, a scheduled one included) and its last few as events, what the
preflight says about launching it here, the last few runs, and what to run next: after
drift, ``mopt verify`` until a verification here holds.

Reads only: the run index, the recipe file, this machine. Nothing is launched or written
(the index is refreshed, as every reader of it does).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from model_optimizer.archive import index
from model_optimizer.archive.versions import collect_versions
from model_optimizer.errors import RecipeError
from model_optimizer.history.current import (
    CurrentRecipe,
    current_recipe,
    first_recipe_command,
    last_touched,
)
from model_optimizer.history.drift import (
    current_driver,
    drift_messages,
    environment_here,
    pinned_checkpoint_messages,
)
from model_optimizer.history.verifications import ENVIRONMENT_KEYS, of_revision, verifications

RECENT = 5
SEARCHES = ("sweep", "tune")
UNFINISHED = ("interrupted", "abandoned")


@dataclass
class Status:
    """Everything ``mopt status`` shows; ``to_dict`` is its ``--json``."""

    runs_dir: str
    archives: int
    machine: dict
    current: CurrentRecipe | None = None
    recipe: dict | None = None          # name, revision, valid, errors, validated
    drift: list[str] = field(default_factory=list)
    verification: dict | None = None    # the revision's latest verification, and if here
    preflight: dict | None = None       # refusals and warnings (Diagnostic dicts)
    recent: list[dict] = field(default_factory=list)
    next: list[dict] = field(default_factory=list)   # command, why

    def to_dict(self) -> dict:
        """JSON-ready form."""
        data = asdict(self)
        data["current"] = self.current.to_dict() if self.current else None
        return data


def _recent(rows: list[dict], count: int = RECENT) -> list[dict]:
    top = sorted((r for r in rows if not r.get("parent")),
                 key=lambda r: (last_touched(r), r["id"]), reverse=True)
    keys = ("id", "kind", "recipe_name", "recipe_revision", "recipe_file", "created_at",
            "finished_at", "qps", "ttft_p99_ms", "slo_met")
    return [{**{k: row.get(k) for k in keys}, "status": index.shown_status(row)}
            for row in top[:count]]


def _machine() -> dict:
    from model_optimizer.telemetry import this_hardware

    versions = collect_versions()
    return {"vllm": versions.get("vllm"), "vllm_distribution": versions.get("vllm_distribution"),
            "hardware": this_hardware(), "driver": current_driver()}


def _recipe_facts(current: CurrentRecipe, cwd: Path, status: Status, probe) -> object:
    """Load the current recipe; fill recipe, drift and preflight. The loaded recipe or None."""
    from model_optimizer.preflight import preflight
    from model_optimizer.recipe import load_recipe

    try:
        loaded = load_recipe(cwd / current.path)
    except RecipeError as exc:
        status.recipe = {"valid": False, "errors": [d.format() for d in exc.diagnostics]}
        return None
    resolved = loaded.resolved
    status.recipe = {"valid": True, "name": resolved["name"], "revision": resolved["revision"],
                     "accelerator": resolved["hardware"]["accelerator"],
                     "validated": resolved.get("validated")}
    status.drift = [*pinned_checkpoint_messages(resolved, loaded.base_dir),
                    *drift_messages(resolved, status.machine["vllm"], status.machine["hardware"],
                                    status.machine.get("driver"))]
    status.verification = latest_verification(Path(status.runs_dir), loaded)
    status.preflight = preflight(loaded, probe).to_dict()
    return loaded


def latest_verification(root: Path, loaded) -> dict | None:
    """The revision's newest verification, with ``here``: measured in this environment
    (vLLM, hardware, driver, checkpoint), so it decides ``apply --strict``; and ``events``,
    the revision's last ``RECENT`` verifications (any environment), newest first."""
    found = of_revision(verifications(root, loaded.name), loaded.resolved)
    if not found:
        return None
    environment = environment_here(loaded.resolved, loaded.base_dir)
    here = next((r for r in found if all(r.environment.get(k) == environment.get(k)
                                         for k in ENVIRONMENT_KEYS)), None)
    latest = here or found[0]
    events = [{"at": r.at, "line": r.line(), "verdict": r.word, "id": r.id}
              for r in found[:RECENT]]
    return {**latest.to_dict(), "line": latest.line(), "here": latest is here,
            "events": events}


def _sweep_command(resolved: dict) -> str:
    sweep = resolved["sweep"]
    param = sweep["param"]
    start = sweep.get("start") or resolved["engine"].get(param) or 1
    start = int(start) if isinstance(start, float) and start.is_integer() else start
    return f"mopt sweep --param {param} --start {start}"


def next_steps(status: Status, loaded, root: str, cwd: Path | None = None) -> list[dict]:
    """What to run next, most useful first, each with why (a first apply names a recipe
    file found in ``cwd``, or ``mopt init`` when there is none)."""
    steps: list[dict] = []
    latest = status.recent[0] if status.recent else None
    if latest and latest["kind"] in SEARCHES and latest["status"] in UNFINISHED:
        steps.append({"command": f"mopt {latest['kind']} --resume {root}/{latest['id']}",
                      "why": f"the last {latest['kind']} was {latest['status']}; finished "
                             "steps are not rerun"})
    if status.current is None:
        first = first_recipe_command("apply", cwd)
        why = ("no current recipe yet: apply one (any recipe file); after that, commands "
               "without a RECIPE use it") if first.startswith("mopt apply") else (
               "no current recipe and no recipe file here: init writes one for your model "
               "folder, then `mopt apply` it")
        return steps + [{"command": first, "why": why}]
    if loaded is None:
        return steps + [{"command": f"mopt validate {status.current.path}",
                         "why": "the current recipe does not validate"}]
    refusals = (status.preflight or {}).get("refusals") or []
    if refusals:
        first = refusals[0]
        steps.append({"command": f"edit {first['file']}" + (f":{first['line']}" if first["line"]
                                                             else ""),
                      "why": f"the preflight refuses to launch it here: {first['message']}"
                             + (f" ({first['hint']})" if first.get("hint") else "")})
        return steps
    sweep = _sweep_command(loaded.resolved)
    if not status.recipe.get("validated"):
        steps.append({"command": sweep, "why": "this revision has no measured figures: a "
                      "sweep measures it and writes a validated revision"})
    elif status.drift:
        steps += _after_drift(status, sweep)
    else:
        steps.append({"command": "mopt apply", "why": "re-measure the current revision "
                      "against its validated figures"})
        if loaded.resolved.get("tune", {}).get("params"):
            steps.append({"command": "mopt tune", "why": "search the knobs of its tune "
                          "section together"})
    if latest and latest["status"].startswith("failed"):
        steps.append({"command": f"mopt runs show {latest['id']}",
                      "why": f"the last run failed ({latest['status']})"})
    return steps


def _after_drift(status: Status, sweep: str) -> list[dict]:
    """After drift: verify it here, or, once a verification here regressed, re-validate."""
    verified = status.verification if (status.verification or {}).get("here") else None
    if verified is None:
        return [{"command": "mopt verify", "why": "it was validated elsewhere (see drift): "
                 "re-measure it here and see whether its figures hold (apply --strict "
                 "refuses it until a verification here holds)"},
                {"command": sweep, "why": "or re-validate it on this machine at once"}]
    if verified["verdict"] == "holds":
        return [{"command": "mopt apply --strict",
                 "why": f"{verified['line']}: the drift did not change its figures"}]
    return [{"command": sweep, "why": f"{verified['line']}: re-validate it on this machine"}]


def gather(root: str | Path, cwd: Path | None = None, probe=None) -> Status:
    """The status of runs dir ``root`` on this machine (``probe``: a preflight Machine)."""
    root = Path(root)
    rows = index.all_rows(root) if root.is_dir() else []
    status = Status(str(root), len([r for r in rows if not r.get("parent")]), _machine())
    status.recent = _recent(rows)
    status.current = current_recipe(root, cwd) if rows else None
    loaded = (_recipe_facts(status.current, cwd or Path.cwd(), status, probe)
              if status.current else None)
    status.next = next_steps(status, loaded, str(root), cwd)
    return status
