"""The current recipe of a runs dir: the recipe file most recently used there.

A command that takes a recipe may omit it; mopt then works on the file that was most
recently applied, swept, tuned, quantized, optimized or rolled back under the same
``runs/`` (the run index knows each archive's recipe file and when it was last touched).
Steps of sweeps and tunes count through their parent, ``bench`` runs do not count (they
measure a server that mopt did not launch). A file that no longer exists is passed over for
the next most recent one, and said so.

Recipe files are recorded as they were given (often relative to the directory mopt ran
in); a relative one is looked up from the current directory, then from the folder holding
the runs dir (where ``runs/`` sits by default).

Only archives that verify count (:func:`trusted`): sealed, their manifest matching every
file (or still being written by a live mopt), and not dated in the future. An unsealed or
edited archive, or one whose time is ahead of the clock (it would stay "most recent"
forever), is skipped and named: it cannot choose the recipe a bare ``mopt export`` exports.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from model_optimizer.archive import index
from model_optimizer.archive.manifest import verify_archive
from model_optimizer.errors import UsageError

#: archive kind -> the command that used the recipe
USED_BY = {"run": "apply", "sweep": "sweep", "tune": "tune", "rollback": "rollback",
           "quantize": "quantize", "optimize": "optimize", "eval": "eval", "verify": "verify"}


class NoCurrentRecipe(UsageError):
    """No recipe was given and the runs dir names none that still exists."""


@dataclass(frozen=True)
class CurrentRecipe:
    """The recipe file a command works on when none is given, and why it was chosen."""

    path: Path                 # to open (relative to the current directory when under it)
    revision: int | None       # the revision the file holds now
    last_used: str | None      # ISO time the archive that used it last changed
    by: str                    # apply, sweep, tune or rollback
    run_id: str                # that archive
    status: str                # its status
    passed_over: list[str] = field(default_factory=list)  # newer files that are gone
    untrusted: list[str] = field(default_factory=list)    # newer archives that do not verify

    def announce(self, now: datetime | None = None) -> str:
        """``using recipes/x.yaml (revision 3, last used 5 min ago by sweep)``."""
        revision = "?" if self.revision is None else self.revision
        text = (f"using {self.path} (revision {revision}, last used "
                f"{ago(self.last_used, now)} by {self.by})")
        if self.passed_over:
            text += f"; passed over {', '.join(self.passed_over)}: no longer there"
        if self.untrusted:
            text += f"; ignored {'; '.join(self.untrusted)}"
        return text

    def to_dict(self) -> dict:
        """JSON-ready form."""
        return {**asdict(self), "path": str(self.path)}


def moment_of(stamp: str | None) -> datetime | None:
    """The time an archive's ISO stamp names (UTC when it gives no zone), None when absent
    or unreadable."""
    if not stamp:
        return None
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def ago(stamp: str | None, now: datetime | None = None) -> str:
    """``12 s ago``, ``5 min ago``, ``3 h ago``, ``2 days ago`` (or ``at an unknown time``)."""
    moment = moment_of(stamp)
    if moment is None:
        return "at an unknown time"
    seconds = max(((now or datetime.now(UTC)) - moment).total_seconds(), 0.0)
    for limit, unit, size in ((60, "s", 1), (3600, "min", 60), (86400, "h", 3600)):
        if seconds < limit:
            return f"{int(seconds // size)} {unit} ago"
    days = int(seconds // 86400)
    return f"{days} day{'s' if days != 1 else ''} ago"


def last_touched(row: dict) -> str:
    """When an archive was last used: finished, else last status update, else started."""
    return row.get("finished_at") or row.get("updated_at") or row.get("created_at") or ""


def locate(recorded: str, root: Path, cwd: Path | None = None) -> Path | None:
    """The existing file a recorded recipe path names, or None when it is gone."""
    path = Path(recorded).expanduser()
    cwd = (cwd or Path.cwd()).resolve()
    candidates = [path] if path.is_absolute() else [cwd / path, root.resolve().parent / path]
    for candidate in candidates:
        if candidate.is_file():
            return _shown(candidate, cwd)
    return None


def _shown(path: Path, cwd: Path) -> Path:
    resolved = path.resolve()
    try:
        return resolved.relative_to(cwd)
    except ValueError:
        return resolved


def file_revision(path: Path) -> int | None:
    """The ``revision`` a recipe file holds now (1 when unset; None when unreadable)."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if not isinstance(document, dict):
        return None
    revision = document.get("revision", 1)
    return revision if isinstance(revision, int) else None


def candidates(rows: list[dict]) -> list[dict]:
    """Top-level archives that used a recipe file, most recently touched first."""
    used = [row for row in rows if not row.get("parent") and row.get("kind") in USED_BY
            and row.get("recipe_file")]
    return sorted(used, key=lambda row: (last_touched(row), row["id"]), reverse=True)


#: how far an archive's time may be ahead of this clock (clocks of machines sharing runs/)
CLOCK_SKEW = timedelta(minutes=5)


def distrust(row: dict, root: Path, now: datetime | None = None) -> str | None:
    """Why an archive may not choose the current recipe (None: it may): dated in the future,
    or it does not verify (unsealed, edited, half-written; one a live mopt is still writing
    is trusted)."""
    moment = moment_of(last_touched(row))
    if moment is not None and moment > (now or datetime.now(UTC)) + CLOCK_SKEW:
        return f"{row['id']} (dated {last_touched(row)}, in the future)"
    problems = [p for p in verify_archive(root / row["path"]) if p.kind != "in_progress"]
    if problems:
        return f"{row['id']} (does not verify: {problems[0].kind.replace('_', ' ')})"
    return None


def current_recipe(root: str | Path, cwd: Path | None = None,
                   now: datetime | None = None) -> CurrentRecipe | None:
    """The current recipe of runs dir ``root``, or None when no trusted archive names one
    that exists."""
    root = Path(root)
    passed_over: list[str] = []
    untrusted: list[str] = []
    for row in candidates(index.all_rows(root)):
        found = locate(row["recipe_file"], root, cwd)
        if found is None:
            if row["recipe_file"] not in passed_over:
                passed_over.append(row["recipe_file"])
            continue
        why = distrust(row, root, now)
        if why is not None:
            untrusted.append(why)
            continue
        revision = file_revision((cwd or Path.cwd()) / found)
        return CurrentRecipe(found, revision, last_touched(row) or None,
                             USED_BY[row["kind"]], row["id"], index.shown_status(row),
                             passed_over, untrusted)
    return None


def recipe_files_here(cwd: Path | None = None) -> list[Path]:
    """Recipe files in ``cwd`` and its ``recipes/`` folder (YAML naming a recipe_version),
    relative to ``cwd``, sorted."""
    cwd = cwd or Path.cwd()
    found = []
    for path in sorted([*cwd.glob("*.yaml"), *cwd.glob("recipes/*.yaml")]):
        try:
            with path.open(encoding="utf-8", errors="replace") as handle:
                head = handle.read(4096)
        except OSError:
            continue
        if "recipe_version:" in head:
            found.append(path.relative_to(cwd))
    return found


def first_recipe_command(command: str, cwd: Path | None = None) -> str:
    """``mopt COMMAND <a recipe file that is here>``, or ``mopt init`` when there is none."""
    here = recipe_files_here(cwd)
    return f"mopt {command} {here[0]}" if here else "mopt init MODEL_FOLDER"


def require_current(root: str | Path, command: str, cwd: Path | None = None) -> CurrentRecipe:
    """The current recipe, or a usage error that says how to give one."""
    found = current_recipe(root, cwd)
    if found is not None:
        return found
    root = Path(root)
    why = (f"no run under {root} that verifies names a recipe file that still exists"
           if root.is_dir() else f"{root} holds no runs yet")
    first = first_recipe_command(command, cwd)
    name_one = (f"Name one, e.g. `{first}`" if not first.startswith("mopt init")
                else f"Name a recipe file, or write one for your model with `{first}`")
    raise NoCurrentRecipe(
        f"no RECIPE given and there is no current recipe: {why}. {name_one} (after that, "
        f"`mopt {command}` alone uses the recipe last applied, swept, tuned or rolled back "
        "here), or point --runs-dir / $MOPT_RUNS_DIR at the runs dir you worked in.")
