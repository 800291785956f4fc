"""Search progress displays dispatch their own phases through an explicit table."""

from __future__ import annotations

import inspect
import io

import pytest
from rich.console import Console

from model_optimizer.cli.optimize import OptimizeProgress
from model_optimizer.cli.progress import SearchProgress
from model_optimizer.cli.sweep import SweepProgress
from model_optimizer.cli.tune import TuneProgress

#: the phases every run emits (runner.run_recipe), shown by RunProgress itself
RUN_PHASES = {"archive", "starting", "waiting", "ready", "start_failed", "load", "progress",
              "stopping", "done"}


def display(cls: type[SearchProgress]) -> tuple[SearchProgress, io.StringIO]:
    out = io.StringIO()
    return cls(Console(file=out, width=200)), out


@pytest.mark.parametrize("cls", [SweepProgress, TuneProgress, OptimizeProgress])
def test_every_handler_method_is_in_the_table_and_the_table_has_nothing_else(cls):
    progress, _ = display(cls)
    table = progress.handlers()
    defined = {name for name, _ in inspect.getmembers(cls, inspect.isfunction)
               if name.startswith("_on_")}
    assert {handler.__name__ for handler in table.values()} == defined
    assert not set(table) & RUN_PHASES  # a search phase never hides a run's


def test_a_search_phase_goes_to_its_handler_and_a_run_phase_to_the_run_display():
    progress, out = display(SweepProgress)
    progress("archive", {"path": "/runs/s"})
    progress("step", {"index": 1, "value": 4, "reason": "grow"})
    progress("ready", {"ready_after_s": 1.5})
    progress("unheard_of", {})  # neither: ignored, not an error
    text = out.getvalue()
    assert "sweep archive: /runs/s" in text and "step 1: 4 (grow)" in text
    assert "server healthy after 1.5 s" in text
