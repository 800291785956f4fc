"""Shell completion values: recipe files and archived runs.

Completion itself is typer's (``mopt --install-completion``, ``mopt --show-completion``):
the shell calls ``mopt`` with ``_MOPT_COMPLETE=complete_bash`` (or zsh, fish, powershell)
and these functions supply the values of arguments that name a recipe file or a run.
They must be quick and must never fail: any error yields no values (the shell then falls
back to its own file completion).
"""

from __future__ import annotations

import os
from pathlib import Path

import typer

from model_optimizer.archive import runs_dir

RECIPE_SUFFIXES = (".yaml", ".yml")
SEARCH_KINDS = ("sweep", "tune")


def recipe_files(incomplete: str, cwd: Path | None = None) -> list[str]:
    """Recipe files (``*.yaml``, ``*.yml``) and folders that start with ``incomplete``.

    Folders end with ``/`` so the next TAB goes inside; hidden entries only when asked for.
    """
    cwd = cwd or Path.cwd()
    head, sep, prefix = incomplete.rpartition("/")
    folder = Path(os.path.expanduser(head or "/")) if sep else Path(".")
    base = folder if folder.is_absolute() else cwd / folder
    shown = f"{head}/" if sep else ""
    out: list[str] = []
    try:
        entries = sorted(base.iterdir(), key=lambda p: p.name)
    except OSError:
        return []
    for entry in entries:
        name = entry.name
        if not name.startswith(prefix) or (name.startswith(".") and not prefix.startswith(".")):
            continue
        if entry.is_dir():
            out.append(f"{shown}{name}/")
        elif entry.suffix in RECIPE_SUFFIXES:
            out.append(f"{shown}{name}")
    return out


def _archives(root: Path, kinds: tuple[str, ...] | None) -> list[dict]:
    """Top-level archives under ``root``, newest first, read from the run index."""
    from model_optimizer.archive import index

    rows = index.all_rows(root) if root.is_dir() else []
    return [row for row in rows if not row.get("parent")
            and (kinds is None or row.get("kind") in kinds)]


def run_refs(incomplete: str, root: Path, kinds: tuple[str, ...] | None = None
             ) -> list[tuple[str, str]]:
    """Archives matching ``incomplete``, newest first, with a short description each.

    ``runs/<TAB>`` (the runs dir as typed, or any path ending in it) offers folder paths;
    anything else offers ids (``2026<TAB>``, or the empty word).
    """
    rows = _archives(root, kinds)
    typed_dir, _, prefix = incomplete.rpartition("/")
    shown_dir = typed_dir or str(root).rstrip("/")
    as_paths = bool(typed_dir) or shown_dir.startswith(incomplete)
    if as_paths and not typed_dir:
        prefix = ""
    out = []
    for row in rows:
        if not row["id"].startswith(prefix) and not row["id"].endswith(f"-{prefix}"):
            continue
        value = f"{shown_dir}/{row['id']}" if as_paths else row["id"]
        help_text = " ".join(str(part) for part in (
            row.get("kind"), row.get("recipe_name") or "-",
            f"rev {row.get('recipe_revision')}", row.get("status")) if part)
        out.append((value, help_text))
    return out


def _root_of(ctx: typer.Context | None) -> Path:
    explicit = (ctx.params.get("runs_dir_opt") if ctx is not None else None)
    return runs_dir(explicit)


def complete_recipe(incomplete: str) -> list[str]:
    """Typer completer: recipe files."""
    try:
        return recipe_files(incomplete)
    except Exception:  # noqa: BLE001 - completion must never fail
        return []


def complete_run(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    """Typer completer: archived runs, sweeps, tunes and rollbacks, newest first."""
    try:
        return run_refs(incomplete, _root_of(ctx))
    except Exception:  # noqa: BLE001
        return []


def complete_search(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    """Typer completer: sweep and tune archives (for ``--resume``), newest first."""
    try:
        return run_refs(incomplete, _root_of(ctx), SEARCH_KINDS)
    except Exception:  # noqa: BLE001
        return []


def complete_run_or_recipe(ctx: typer.Context, incomplete: str) -> list[tuple[str, str]]:
    """Typer completer for ``diff``: archives first (newest first), then recipe files."""
    runs = complete_run(ctx, incomplete)
    return runs + [(path, "recipe file") for path in complete_recipe(incomplete)]
