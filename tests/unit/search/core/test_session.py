"""The search core: a search run's archive (create, resume), state.json, the clock and the
time budget, measuring under steps/, and sealing with interrupts held off."""

from __future__ import annotations

import json
import os
import signal
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from model_optimizer.archive import index
from model_optimizer.archive.names import GIVEN_RECIPE, MANIFEST_FILE, STATE_FILE, STATUS_FILE
from model_optimizer.errors import UsageError
from model_optimizer.events import ArchiveOpened
from model_optimizer.recipe import load_recipe
from model_optimizer.search.core import session as session_module
from model_optimizer.search.core.session import SearchSession, SearchState, read_search_archive
from model_optimizer.search.measure import Measurement

ROOT = Path(__file__).resolve().parents[4]


@dataclass(kw_only=True)
class DemoState(SearchState):
    """A strategy's own state: what it measured."""

    seen: list[int] = field(default_factory=list)


@pytest.fixture
def loaded(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text((ROOT / "recipes" / "tiny-cpu.yaml").read_text()
                    .replace("../models/tiny-llama", str(ROOT / "models" / "tiny-llama")))
    return load_recipe(path, ["engine.max_num_seqs=4"])


def new_session(loaded, runs: Path, events: list | None = None) -> SearchSession:
    def state_for(archive):
        return DemoState(recipe_file=str(loaded.path), overrides=list(loaded.overrides),
                         output=str(loaded.path), model_config=None)
    on_event = (events.append) if events is not None \
        else None
    return SearchSession.create("demo", loaded, runs, state_for, on_event)


def status_of(folder: Path) -> dict:
    return json.loads((folder / STATUS_FILE).read_text())


def test_create_archives_the_recipe_and_the_first_state(loaded, tmp_path):
    events: list = []
    session = new_session(loaded, tmp_path / "runs", events)
    folder = session.archive.path
    assert folder.parent == tmp_path / "runs" and "-tiny-cpu-demo-" in folder.name
    assert (folder / GIVEN_RECIPE).read_text() == loaded.source_text
    state = json.loads((folder / STATE_FILE).read_text())
    assert state["seen"] == [] and state["elapsed_s"] == 0.0
    assert status_of(folder)["kind"] == "demo" and status_of(folder)["status"] == "running"
    session.announce(resumed=1)
    assert events == [ArchiveOpened(session.archive.id, str(folder), resumed=1)]


def test_the_clock_carries_over_a_resume_and_ends_the_budget(loaded, tmp_path, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(session_module.time, "monotonic", lambda: now[0])
    session = new_session(loaded, tmp_path / "runs")
    now[0] += 90
    assert session.elapsed() == pytest.approx(90)
    assert not session.out_of_time(2) and not session.out_of_time(None)
    session.state.seen.append(4)
    session.save()
    saved = json.loads((session.archive.path / STATE_FILE).read_text())
    assert saved["elapsed_s"] == pytest.approx(90) and saved["seen"] == [4]

    now[0] += 3600  # the process is gone for an hour: that time is not search time
    state, finished = read_search_archive("demo", session.archive.path, DemoState)
    assert not finished and state.seen == [4]
    again = SearchSession.resume("demo", session.archive.path, state)
    now[0] += 40
    assert again.elapsed() == pytest.approx(130)
    assert again.out_of_time(2) and not again.out_of_time(3)
    assert status_of(again.archive.path)["phase"] == "resumed"


def test_resume_reloads_the_archived_recipe_not_the_changed_file(loaded, tmp_path):
    session = new_session(loaded, tmp_path / "runs")
    loaded.path.write_text("name: changed since\n")
    state, _ = read_search_archive("demo", session.archive.path, DemoState)
    again = SearchSession.resume("demo", session.archive.path, state)
    assert again.loaded.source_text == loaded.source_text
    assert again.loaded.resolved["engine"]["max_num_seqs"] == 4  # the --set kept
    assert again.loaded.path == loaded.path


def test_finishing_writes_the_status_and_seals(loaded, tmp_path):
    session = new_session(loaded, tmp_path / "runs")
    calls = []
    result = session.run(lambda: "outcome",
                         lambda outcome: (calls.append(outcome), ("ok", {"best": 3}))[1],
                         lambda: calls.append("interrupted"))
    folder = session.archive.path
    assert result == "outcome" and calls == ["outcome"]
    status = status_of(folder)
    assert status["status"] == "ok" and status["best"] == 3 and status["finished_at"]
    assert (folder / MANIFEST_FILE).is_file()  # sealed ...
    [row] = index.all_rows(tmp_path / "runs", refresh_first=False)  # ... and registered
    assert row["id"] == session.archive.id and row["status"] == "ok" and row["kind"] == "demo"
    assert read_search_archive("demo", folder, DemoState)[1] is True  # finished


def test_ctrl_c_saves_marks_interrupted_writes_outputs_seals_and_reraises(loaded, tmp_path):
    session = new_session(loaded, tmp_path / "runs")

    def search():
        session.state.seen.append(8)
        raise KeyboardInterrupt

    outputs = []
    with pytest.raises(KeyboardInterrupt):
        session.run(search, lambda outcome: ("ok", {}), lambda: outputs.append("partial"))
    folder = session.archive.path
    status = status_of(folder)
    assert status["status"] == "interrupted"
    assert status["resume"] == f"mopt demo --resume {folder}"
    assert outputs == ["partial"]
    assert json.loads((folder / STATE_FILE).read_text())["seen"] == [8]
    assert (folder / MANIFEST_FILE).is_file()


@pytest.mark.parametrize("where", ["finish", "interrupted"])
def test_a_second_ctrl_c_while_writing_outputs_still_seals(loaded, tmp_path, where):
    """The bug the core removes by construction: a Ctrl-C during the (slow) outputs left the
    archive unsealed. Now it is held off until the archive is sealed, then raised."""
    session = new_session(loaded, tmp_path / "runs")
    reached = []

    def outputs_interrupted_midway():
        os.kill(os.getpid(), signal.SIGINT)  # the user presses Ctrl-C (again)
        reached.append("rest of the outputs")

    def search():
        if where == "interrupted":
            raise KeyboardInterrupt
        return "done"

    def finish(outcome):
        outputs_interrupted_midway()
        return "ok", {}

    with pytest.raises(KeyboardInterrupt):
        session.run(search, finish, outputs_interrupted_midway)
    folder = session.archive.path
    assert reached == ["rest of the outputs"]
    assert status_of(folder)["status"] == ("ok" if where == "finish" else "interrupted")
    assert (folder / MANIFEST_FILE).is_file()


@pytest.mark.parametrize("seal_on_error", [False, True])
def test_an_error_seals_only_when_the_strategy_asks(loaded, tmp_path, seal_on_error):
    """A sweep or tune left by an error stays `running` for the reaper (their behaviour);
    a pipeline (optimize) asks for its record to be closed whatever stopped it."""
    session = new_session(loaded, tmp_path / "runs")
    outputs = []

    def search():
        session.state.seen.append(5)
        raise RuntimeError("a stage broke")

    with pytest.raises(RuntimeError, match="a stage broke"):
        session.run(search, lambda outcome: ("ok", {}), lambda: outputs.append("partial"),
                    seal_on_error=seal_on_error)
    folder = session.archive.path
    if seal_on_error:
        assert status_of(folder)["status"] == "interrupted"
        assert outputs == ["partial"] and (folder / MANIFEST_FILE).is_file()
        assert json.loads((folder / STATE_FILE).read_text())["seen"] == [5]
    else:
        assert status_of(folder)["status"] == "running"
        assert outputs == [] and not (folder / MANIFEST_FILE).exists()


def test_measure_archives_steps_under_the_search_with_labels(loaded, tmp_path, monkeypatch):
    seen = {}

    def fake_measure_configuration(step, runs_base, **kwargs):
        seen.update(step=step, runs_base=runs_base, **kwargs)
        return Measurement("ok", samples=[1.0])

    monkeypatch.setattr(session_module, "measure_configuration", fake_measure_configuration)
    session = new_session(loaded, tmp_path / "runs")
    result = session.measure(loaded, repeats=2, objective="qps", labels={"value": 4})
    assert result.samples == [1.0]
    assert seen["runs_base"] == session.archive.path / "steps" == session.steps_dir
    assert seen["repeats"] == 2 and seen["objective"] == "qps"
    assert seen["archive_extra"] == {"demo": session.archive.id, "value": 4}
    assert seen["model_config"] is None and seen["step"] is loaded


def test_an_unreadable_archive_is_a_usage_error_naming_the_folder(tmp_path):
    with pytest.raises(UsageError, match=f"{tmp_path}: not a resumable demo archive"):
        read_search_archive("demo", tmp_path, DemoState)
    (tmp_path / STATE_FILE).write_text('{"unknown_field": 1}')
    (tmp_path / GIVEN_RECIPE).write_text("name: x\n")
    (tmp_path / STATUS_FILE).write_text('{"status": "interrupted"}')
    with pytest.raises(UsageError, match="mopt demo"):
        read_search_archive("demo", tmp_path, DemoState)


def test_a_new_search_reaps_abandoned_archives_of_its_runs_dir(loaded, tmp_path):
    from model_optimizer.archive import RunArchive

    killed = RunArchive.create(tmp_path / "runs", "killed-apply")
    state = status_of(killed.path)
    (killed.path / STATUS_FILE).write_text(json.dumps({**state, "pid": 2**22 + 7}))
    new_session(loaded, tmp_path / "runs")  # its steps reap only inside its own folder
    assert status_of(killed.path)["status"] == "interrupted"
    assert (killed.path / MANIFEST_FILE).is_file()
