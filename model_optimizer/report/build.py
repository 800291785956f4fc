"""Build the self-contained HTML report of one archive (a run, a sweep, a tune, an optimize)."""

from __future__ import annotations

from pathlib import Path

from model_optimizer.archive.names import REPORT_HTML, STATUS_FILE
from model_optimizer.fsutil import atomic_write_text
from model_optimizer.report.kinds import SECTIONS, read_json
from model_optimizer.report.page import Page


def kind_of(folder: Path) -> str:
    """The archive's kind as its status.json records it (a run when it says nothing)."""
    return str(read_json(folder, STATUS_FILE).get("kind") or "run")


def render_report(folder: str | Path) -> str:
    """The HTML page of the archive in ``folder``, from its archived files only."""
    folder = Path(folder)
    status = read_json(folder, STATUS_FILE)
    kind = kind_of(folder)
    entry = status.get("entry") or {}
    recipe = entry.get("recipe_name") or "?"
    revision = entry.get("recipe_revision")
    subtitle = (f"{kind} of recipe {recipe}" + (f" revision {revision}" if revision else "")
                + f"; {entry.get('created_at') or status.get('created_at') or '-'}; vLLM "
                f"{entry.get('vllm_version') or '-'} on {entry.get('hardware') or '-'}")
    page = Page(f"mopt {kind} {status.get('id') or folder.name}", subtitle)
    section = SECTIONS.get(kind)
    if section is None:
        page.verdict(f"status {status.get('status', '?')}", "ok" if status.get("status") == "ok"
                     else "warn")
        page.paragraph(f"a {kind} archive: its figures are in its report.md", "muted")
    else:
        section(page, folder, status)
    return page.render()


def write_report(folder: str | Path, output: str | Path | None = None) -> Path:
    """Write the report of ``folder`` to ``output`` (default: report.html inside the folder,
    for an archive that is not sealed yet) atomically; returns the path written."""
    target = Path(output) if output is not None else Path(folder) / REPORT_HTML
    atomic_write_text(target, render_report(folder))
    return target
