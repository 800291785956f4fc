"""Emitters and listeners of progress events are tied: every event a command's loop emits is
a defined event class, built with its real field names, and its command's display shows it
(reading the fields it reads), so a field renamed or a kind added on one side fails here."""

from __future__ import annotations

import ast
import dataclasses
import io
import typing
from pathlib import Path

import pytest
from rich.console import Console

from model_optimizer import events
from model_optimizer.cli.capacity import CapacityProgress
from model_optimizer.cli.eval import EvalProgress
from model_optimizer.cli.optimize import OptimizeProgress
from model_optimizer.cli.progress import RunProgress
from model_optimizer.cli.sweep import SweepProgress
from model_optimizer.cli.tune import TuneProgress

PACKAGE = Path(events.__file__).parent
RUN = ["runner.py", "search/core/session.py"]  # every run's and every search's own events
#: each command's display and the modules whose events reach it
COMMANDS: dict[type[RunProgress], list[str]] = {
    SweepProgress: [*RUN, "search/sweep/steps.py", "search/sweep/choice.py",
                    "search/sweep/probe.py", "search/sweep/strategies/probescan.py",
                    "search/sweep/strategies/probefit.py"],
    TuneProgress: [*RUN, "search/tune/loop.py", "search/tune/scan.py", "search/tune/confirm.py"],
    OptimizeProgress: [*RUN, "search/optimize/pipeline.py", "quantize/run.py"],
    CapacityProgress: ["runner.py", "search/capacity.py"],
    EvalProgress: ["quality/evaluate.py"],
    RunProgress: ["runner.py"],
}
#: shown elsewhere or on purpose not at all: the outcome (the command prints it), the quality
#: gate's own steps (its eval's run events are shown), a window's load line (capacity)
NOT_SHOWN = {events.Done, events.TuneFinished, events.QualityBaseline, events.QualityEval}
HIDDEN_BY = {CapacityProgress: {events.LoadStarted}}
#: the archived records some events carry, as their emitters fill them
RECORDS = {events.StartFailed: {"failure": {"class": "oom"}},
           events.TuneTrialDone: {"record": {"status": "ok", "feasible": True, "values": [2]}},
           events.StageDone: {"record": {"status": "ok", "seconds": 3.0}}}
SAMPLE = {int: 2, float: 1.5, str: "x", bool: True, dict: {}, list: [], typing.Any: 3}


def emitted(module: str) -> dict[str, list[ast.Call]]:
    """The event classes ``module`` constructs (``Name(...)`` or ``events.Name(...)``)."""
    found: dict[str, list[ast.Call]] = {}
    for node in ast.walk(ast.parse((PACKAGE / module).read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if isinstance(getattr(events, name, None), type) \
                    and issubclass(getattr(events, name), events.Event):
                found.setdefault(name, []).append(node)
    return found


def example(cls: type[events.Event]) -> events.Event:
    """An instance of ``cls`` with a plausible value for each field, by its type."""
    hints = typing.get_type_hints(cls)
    values = {}
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        options = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
        base = typing.get_origin(options[0]) or options[0]
        values[field.name] = SAMPLE[base]
    return cls(**{**values, **RECORDS.get(cls, {})})


def shown(display: type[RunProgress], event: events.Event) -> list[str]:
    out: list[str] = []
    progress = display(Console(file=io.StringIO()))
    progress._log = progress._show = out.append  # type: ignore[method-assign]
    progress(event)
    return out


def test_every_event_class_has_its_own_kind_and_only_the_two_confirmations_share_one():
    by_kind = events.event_classes()
    assert all(kind for kind in by_kind)
    assert {kind for kind, classes in by_kind.items() if len(classes) > 1} == {"confirm",
                                                                            "confirmed"}


@pytest.mark.parametrize("module", sorted({m for ms in COMMANDS.values() for m in ms}))
def test_emitters_build_defined_events_with_their_real_field_names(module):
    found = emitted(module)
    assert found, f"{module} emits no typed event"
    for name, calls in found.items():
        cls = getattr(events, name)
        fields = {field.name for field in dataclasses.fields(cls)}
        for call in calls:
            named = {k.arg for k in call.keywords if k.arg is not None}
            assert named <= fields, (module, name, named - fields)
            assert len(call.args) <= len(fields), (module, name)


def test_no_emitter_is_left_with_a_string_event():
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr",
                                                      getattr(node.func, "id", "")) in (
                    "emit", "on_event") and node.args \
                    and isinstance(node.args[0], ast.Constant):
                pytest.fail(f"{path}:{node.lineno}: emits a string, not an event class")


@pytest.mark.parametrize("display", list(COMMANDS), ids=lambda cls: cls.__name__)
def test_each_display_shows_every_event_its_command_emits(display):
    names = {name for module in COMMANDS[display] for name in emitted(module)}
    classes = {getattr(events, name) for name in names} - NOT_SHOWN - HIDDEN_BY.get(display,
                                                                                     set())
    silent = [cls.__name__ for cls in sorted(classes, key=lambda c: c.__name__)
              if not shown(display, example(cls))]
    assert not silent, f"{display.__name__} shows nothing for {silent}"


def test_events_outside_a_display_are_ignored_quietly():
    for cls in (events.Done, events.QualityEval):
        assert shown(SweepProgress, example(cls)) == []
