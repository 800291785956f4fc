"""Search progress displays dispatch their own events through an explicit table."""

from __future__ import annotations

import inspect
import io

import pytest
from rich.console import Console

from model_optimizer.cli.optimize import OptimizeProgress
from model_optimizer.cli.progress import RUN_EVENTS, SearchProgress
from model_optimizer.cli.sweep import SweepProgress
from model_optimizer.cli.tune import TuneProgress
from model_optimizer.events import ArchiveOpened, Done, Event, Ready, SweepStep

#: the events every run emits (runner.run_recipe), shown by RunProgress itself (``done`` is
#: the outcome, which the command prints)
RUN_PHASES: set[type[Event]] = {*RUN_EVENTS, Done}


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
    assert not set(table) & RUN_PHASES  # a search event never hides a run's


@pytest.mark.parametrize("cls", [SweepProgress, TuneProgress, OptimizeProgress])
def test_each_handler_is_typed_with_the_event_class_it_is_filed_under(cls):
    progress, _ = display(cls)
    for event_class, handler in progress.handlers().items():
        [parameter] = inspect.signature(handler).parameters.values()
        assert parameter.annotation in (event_class.__name__, event_class), handler


def test_a_search_event_goes_to_its_handler_and_a_run_event_to_the_run_display():
    progress, out = display(SweepProgress)
    progress(ArchiveOpened("s", "/runs/s"))
    progress(SweepStep(1, 4, "grow", "grow"))
    progress(Ready(1.5))
    progress(Done({}))  # neither: ignored, not an error
    text = out.getvalue()
    assert "sweep archive: /runs/s" in text and "step 1: 4 (grow)" in text
    assert "server healthy after 1.5 s" in text


def test_a_step_with_a_known_total_shows_done_total_and_the_eta():
    progress, out = display(SweepProgress)
    progress(SweepStep(3, "fp8", "categorical", "next value", done=2, total=4, eta_s=130.0))
    progress(SweepStep(1, 4, "grow", "grow"))
    lines = out.getvalue().splitlines()
    assert lines[0] == "step 3: fp8 (next value) [2/4 done, ETA 2 min]"
    assert lines[1] == "step 1: 4 (grow)"  # the total unknown: no counts, no guess


def test_the_scan_server_line_names_the_strategy_that_scans():
    from model_optimizer.events import ProbeServerStarted

    progress, out = display(SweepProgress)
    progress(ProbeServerStarted(64, "probe-fit"))
    progress(ProbeServerStarted(32))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("probe-fit: one server at max_num_seqs=64")
    assert lines[1].startswith("probe-scan: one server at max_num_seqs=32")
