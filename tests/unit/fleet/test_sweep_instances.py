"""`mopt split FLEET --sweep-instances` on recorded sweep outcomes: each instance swept as the
fleet serves it into the experiment's archive, then one fleet revision (or none: a sweep
that chose nothing, --strict on a choice not resolved); bad input exits 2 before anything
starts. The sweep itself is the one `mopt sweep` runs (test_sweep_instances_mock.py runs
it for real on the mock engine)."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

import model_optimizer.usecase.fleet_sweep as fleet_sweep
from model_optimizer.archive import STATUS_OK, failed_status
from model_optimizer.cli.main import app
from model_optimizer.errors import UsageError
from model_optimizer.fleet import load_fleet
from model_optimizer.fleet.rules import SWEEP_EVIDENCE
from model_optimizer.recipe.writer import write_revision
from model_optimizer.search.sweep.flags import SweepFlags
from model_optimizer.search.sweep.state import SweepOutcome
from model_optimizer.search.sweep.strategy import Point
from model_optimizer.usecase.fleet_sweep import KIND, SWEEPS_FILE, sweep_instances

from .test_sweep_revision import MEMBER, fleet_text

#: what each instance's recorded sweep chooses: (value, resolved); None: nothing chosen
CHOICES = {"f.short": (8, True), "f.long": (2, False)}


class RecordedSweeps:
    """Stands in for usecase.sweep.sweep: writes the recorded choice with the sweep's own
    revision writer (on the recipe it is given) and returns the sweep's outcome."""

    def __init__(self, choices: dict):
        self.choices, self.calls = choices, []

    def __call__(self, loaded, flags, *, runs_base, output, force, on_event, on_notice):
        self.calls.append((loaded, flags, runs_base, output))
        sweep_id = f"sweep-{loaded.name}"
        choice = self.choices[loaded.name]
        if choice is None:
            return SweepOutcome(failed_status("no_acceptable_value"), runs_base / sweep_id,
                                sweep_id, None, "no value met the SLOs")
        value, resolved = choice
        validated = {"at": "2026-12-06T00:00:00Z", "run_id": sweep_id, "by": "sweep",
                     "metrics": {"qps": 3.0, "ttft_p99_ms": 90.0}, "resolved": resolved}
        write_revision(loaded, {("engine", "max_num_seqs"): value}, validated, output)
        return SweepOutcome(STATUS_OK, runs_base / sweep_id, sweep_id,
                            Point(value, "growth", "ok", [3.0]), f"chose {value}", output,
                            {"qps": 3.0}, resolved)


@pytest.fixture
def fleet_file(tmp_path):
    (tmp_path / "member.yaml").write_text(yaml.safe_dump(MEMBER))
    path = tmp_path / "fleet.yaml"
    path.write_text(fleet_text())
    return path


@pytest.fixture
def recorded(monkeypatch):
    def install(choices: dict = CHOICES) -> RecordedSweeps:
        sweeps = RecordedSweeps(choices)
        monkeypatch.setattr(fleet_sweep, "sweep", sweeps)
        return sweeps
    return install


def test_each_instance_is_swept_as_served_and_one_revision_is_written(fleet_file, tmp_path,
                                                                      recorded):
    sweeps = recorded()
    given = fleet_file.read_text()
    fleet = load_fleet(fleet_file)
    outcome = sweep_instances(fleet_file, runs_base=tmp_path / "runs")
    assert outcome.exit_code == 0 and (outcome.written, outcome.revision) == (fleet_file, 2)
    archive = outcome.archive
    for (loaded, flags, runs_base, output), name in zip(sweeps.calls, ("short", "long"),
                                                        strict=True):
        served = fleet.instances[name].recipe.resolved
        assert loaded.resolved == served  # its cores, its share, its classes
        assert flags.param == "max_num_seqs" and not flags.strict
        assert (runs_base, output) == (archive / "steps", archive / f"instance.{name}.yaml")
        written = yaml.safe_load(output.read_text())
        assert written["hardware"] == served["hardware"]  # the served recipe, revised
    again = load_fleet(fleet_file)
    assert {n: i.recipe.spec.engine.max_num_seqs for n, i in again.instances.items()} == \
        {"short": 8, "long": 2}
    evidence = again.resolved[SWEEP_EVIDENCE]
    assert evidence["run_id"] == outcome.run_id
    assert evidence["instances"]["long"] == {
        "run_id": "sweep-f.long", "value": 2, "resolved": False, "reason": "chose 2",
        "figures": {"qps": 3.0, "ttft_p99_ms": 90.0}, "knee": None}
    status = json.loads((archive / "status.json").read_text())
    assert (status["status"], status["kind"], status["phase"]) == ("ok", KIND, "finished")
    assert (archive / "recipe.given.yaml").read_text() == given
    summary = json.loads((archive / SWEEPS_FILE).read_text())
    assert [(s["instance"], s["value"], s["resolved"]) for s in summary["sweeps"]] == [
        ("short", 8, True), ("long", 2, False)]
    assert (archive / "manifest.json").is_file()  # sealed


def test_strict_refuses_the_revision_when_a_choice_is_not_resolved(fleet_file, tmp_path,
                                                                   recorded):
    recorded()
    before = fleet_file.read_text()
    outcome = sweep_instances(fleet_file, strict=True, runs_base=tmp_path / "runs")
    assert outcome.exit_code == 4 and outcome.written is None
    assert "--strict: long written, not resolved" in outcome.refused
    assert fleet_file.read_text() == before
    assert (outcome.archive / "instance.long.yaml").is_file()  # the instance's revision kept
    status = json.loads((outcome.archive / "status.json").read_text())
    assert status["status"] == "failed:not_written" and "--strict" in status["refused"]


def test_a_sweep_that_chose_nothing_leaves_the_fleet_file_as_it_was(fleet_file, tmp_path,
                                                                    recorded):
    recorded({"f.short": (8, True), "f.long": None})
    before = fleet_file.read_text()
    outcome = sweep_instances(fleet_file, output=tmp_path / "next.yaml",
                              runs_base=tmp_path / "runs")
    assert outcome.exit_code == 4 and "no value chosen for long" in outcome.refused
    assert fleet_file.read_text() == before and not (tmp_path / "next.yaml").exists()
    assert [s.status for s in outcome.sweeps] == ["ok", "failed:no_acceptable_value"]


def test_output_writes_the_revision_elsewhere(fleet_file, tmp_path, recorded):
    recorded()
    before = fleet_file.read_text()
    outcome = sweep_instances(fleet_file, output=tmp_path / "next.yaml",
                              runs_base=tmp_path / "runs")
    assert outcome.written == tmp_path / "next.yaml" and fleet_file.read_text() == before
    assert load_fleet(tmp_path / "next.yaml").resolved["revision"] == 2


def test_ctrl_c_in_a_sweep_seals_the_experiment_and_leaves_the_fleet_file(
        fleet_file, tmp_path, recorded, monkeypatch):
    sweeps = recorded()
    real = sweeps.__call__

    def interrupted(loaded, *args, **kwargs):
        if loaded.name == "f.long":
            raise KeyboardInterrupt
        return real(loaded, *args, **kwargs)

    before = fleet_file.read_text()
    monkeypatch.setattr(fleet_sweep, "sweep", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sweep_instances(fleet_file, runs_base=tmp_path / "runs")
    assert fleet_file.read_text() == before
    archive = next((tmp_path / "runs").glob("*f-sweep*"))
    status = json.loads((archive / "status.json").read_text())
    assert (status["status"], status["phase"]) == ("interrupted", "finished")
    summary = json.loads((archive / SWEEPS_FILE).read_text())
    assert [s["instance"] for s in summary["sweeps"]] == ["short"]
    assert (archive / "manifest.json").is_file()


def test_a_fleet_read_from_text_needs_an_output(fleet_file, tmp_path, recorded, monkeypatch):
    from model_optimizer.fleet.load import load_fleet_text

    sweeps = recorded()
    monkeypatch.chdir(tmp_path)  # its member is relative to the working directory
    fleet = load_fleet_text(fleet_file.read_text(), "fleet.yaml")
    with pytest.raises(UsageError, match="needs output="):
        sweep_instances(fleet, runs_base=tmp_path / "runs")
    assert sweeps.calls == []


def test_another_knob_is_refused(fleet_file, tmp_path, recorded):
    recorded()
    with pytest.raises(UsageError, match="sweeps each instance's max_num_seqs, not block_size"):
        sweep_instances(fleet_file, flags=SweepFlags(param="block_size"),
                        runs_base=tmp_path / "runs")


def test_the_command_prints_each_sweep_and_the_revision(fleet_file, tmp_path, recorded):
    recorded()
    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, ["split", str(fleet_file), "--sweep-instances",
                                      "--runs-dir", str(runs)], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "written, not resolved" in result.output
    assert f"wrote revision 2 of the fleet to {fleet_file}" in result.output
    strict = CliRunner().invoke(app, ["split", str(fleet_file), "--sweep-instances",
                                      "--strict", "--runs-dir", str(runs), "--json"])
    assert strict.exit_code == 4, strict.output
    assert json.loads(strict.stdout)["refused"].startswith("--strict: long")


def test_budget_is_each_instance_sweeps(fleet_file, tmp_path, recorded):
    sweeps = recorded()
    result = CliRunner().invoke(app, ["split", str(fleet_file), "--sweep-instances",
                                      "--budget", "3", "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    assert [flags.budget for _, flags, _, _ in sweeps.calls] == [3.0, 3.0]
    assert all(flags.param == "max_num_seqs" for _, flags, _, _ in sweeps.calls)


@pytest.mark.parametrize(("extra", "message"), [
    (["--sweep-instances", "--single", "x.yaml"], "give no --single or --rounds"),
    (["--sweep-instances", "--rounds", "2"], "give no --single or --rounds"),
    (["--strict"], "--strict, --output and --budget go with --sweep-instances"),
    (["--output", "x.yaml"], "--strict, --output and --budget go with --sweep-instances"),
    (["--budget", "3"], "--strict, --output and --budget go with --sweep-instances"),
])
def test_bad_input_exits_2_before_anything_starts(fleet_file, tmp_path, recorded, extra,
                                                  message):
    sweeps = recorded()
    result = CliRunner().invoke(app, ["split", str(fleet_file), *extra, "--runs-dir",
                                      str(tmp_path / "runs")], env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split())
    assert sweeps.calls == [] and not (tmp_path / "runs").exists()


def test_a_broken_fleet_exits_2_at_its_line(fleet_file, tmp_path, recorded):
    sweeps = recorded()
    fleet_file.write_text(fleet_file.read_text().replace("to: long", "to: lnog"))
    result = CliRunner().invoke(app, ["split", str(fleet_file), "--sweep-instances",
                                      "--runs-dir", str(tmp_path / "runs")],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 2, result.output
    assert "fleet.yaml:" in result.output and "lnog" in result.output
    assert sweeps.calls == [] and not (tmp_path / "runs").exists()
