"""What a search command prints about the revision it wrote: validated, or written and not
resolved (issue 35: an unresolved choice was announced as validated)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

import model_optimizer.cli.common as common
from model_optimizer.cli.progress import SearchProgress, run_search


@dataclass
class Outcome:
    written: Path | None
    resolved: bool | None
    reason: str = "max_num_seqs=22: the best acceptable value measured"
    archive: str = "runs/x"
    exit_code: int = 0


@pytest.mark.parametrize(("resolved", "shown", "not_shown"), [
    (True, "(new revision, validated)", "not resolved"),
    (False, "written, not resolved", "validated)"),
])
def test_the_written_revision_is_announced_by_its_verdict(resolved, shown, not_shown, capsys,
                                                          monkeypatch):
    monkeypatch.setattr(common.console, "width", 200)
    outcome = Outcome(Path("recipes/tiny-cpu.yaml"), resolved)
    with pytest.raises(typer.Exit) as ended:
        run_search(lambda: outcome, SearchProgress(common.err_console), "sweep", "report.md",
                   as_json=False)
    printed = capsys.readouterr().out
    assert ended.value.exit_code == 0
    assert "wrote recipes/tiny-cpu.yaml" in printed
    assert shown in printed and not_shown not in printed
