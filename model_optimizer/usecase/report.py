"""``mopt report`` below the command line: one archive's self-contained HTML report, the one
it already holds or one written from its files (``report/``).

    result = report("20261205T231122Z-tiny-cpu-38309e")
    result.path, result.written
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from model_optimizer.archive import runs_dir
from model_optimizer.errors import EXIT_OK
from model_optimizer.history import archives
from model_optimizer.report import REPORT_HTML, write_report


@dataclass(frozen=True)
class ReportResult:
    """The HTML file (``path``) of archive ``archive_id``; ``written``: made now, False
    when it is the report the archive already held."""

    path: Path
    archive_id: str
    written: bool

    @property
    def exit_code(self) -> int:
        """0: an unknown or broken archive raises instead (UsageError, exit 2)."""
        return EXIT_OK


def report(ref: str | Path, *, output: Path | None = None,
           runs_base: Path | None = None) -> ReportResult:
    """The HTML report of run, sweep, tune or optimize ``ref`` (an id, a unique prefix or a
    folder, under ``runs_base``), verified against its manifest first: the archive's own
    ``report.html`` when it holds one and no ``output`` is asked for, else written to
    ``output`` (default ``./mopt-report-<id>.html``). A sealed archive is never changed."""
    view = archives.load(ref, runs_dir(runs_base))
    own = view.path / REPORT_HTML
    if output is None and own.is_file():
        return ReportResult(own, view.id, written=False)
    target = write_report(view.path, output or Path(f"mopt-report-{view.id}.html"))
    return ReportResult(target, view.id, written=True)
