"""The sweep loop with an injected measurement: outputs, written revision, interrupt + resume."""

import json
from pathlib import Path

import pytest
import yaml

from model_optimizer.recipe import load_recipe
from model_optimizer.search.measure import Measurement
from model_optimizer.search.sweep.flags import SweepFlags
from model_optimizer.search.sweep.loop import resume_sweep, start_sweep

ROOT = Path(__file__).resolve().parents[4]
QPS = {1: 3.8, 2: 7.1, 4: 13.0, 8: 23.0, 16: 23.6, 32: 23.9, 64: 24.0}


def interp(value):
    """Throughput between table points (bisection asks for values in between)."""
    keys = sorted(QPS)
    for low, high in zip(keys, keys[1:], strict=False):
        if low <= value <= high:
            return QPS[low] + (QPS[high] - QPS[low]) * (value - low) / (high - low)
    return QPS[keys[-1]]


class FakeMeasure:
    """Deterministic measurements; optionally raises Ctrl-C at the N-th call."""

    def __init__(self, interrupt_at=None):
        self.calls = []
        self.interrupt_at = interrupt_at

    def __call__(self, step, value):
        if self.interrupt_at is not None and len(self.calls) + 1 == self.interrupt_at:
            raise KeyboardInterrupt
        assert step.resolved["engine"]["max_num_seqs"] == value  # the value is applied
        self.calls.append(value)
        qps = round(interp(value), 3)
        figures = {"qps": qps, "goodput_qps": qps, "ttft_p99_ms": 100.0 + value,
                   "tpot_p50_ms": 4.0, "output_tok_s": qps * 32, "status": "ok"}
        return Measurement("ok", samples=[qps], slo_met=True, preemptions=0,
                           run_ids=[f"run-{value}"], figures=figures)


@pytest.fixture
def recipe(tmp_path):
    path = tmp_path / "tiny.yaml"
    path.write_text((ROOT / "recipes" / "tiny-cpu.yaml").read_text()
                    .replace("../models/tiny-llama", str(ROOT / "models" / "tiny-llama")))
    return path


def sweep_once(recipe, runs, measure, output):
    loaded = load_recipe(recipe, ["sweep.confirm_duration_s=0", "workload.concurrency=null",
                                  "sweep.max_launches=20"])
    return start_sweep(loaded, runs, flags=SweepFlags(start=1, strategy="probe-scan"),
                       output=output, measure=measure)   # the growth rules on one server


def test_sweep_writes_outputs_and_a_validated_revision(recipe, tmp_path):
    out = tmp_path / "out.yaml"
    measure = FakeMeasure()
    outcome = sweep_once(recipe, tmp_path / "runs", measure, out)
    assert outcome.exit_code == 0 and outcome.written == out
    history = json.loads((outcome.archive / "state.json").read_text())["history"]
    assert [p["value"] for p in history] == measure.calls
    searched = [p["value"] for p in history if p["phase"] != "remeasure"]
    assert len(searched) == len(set(searched))  # no value searched twice
    remeasured = [p["value"] for p in history if p["phase"] == "remeasure"]
    assert len(set(remeasured)) == 2 and remeasured == remeasured[:2] * 2  # A B A B
    assert [p["phase"] for p in history][-4:] == ["remeasure"] * 4
    written = load_recipe(out)
    assert written.resolved["revision"] == 2
    assert written.resolved["engine"]["max_num_seqs"] == outcome.chosen.value
    assert written.resolved["workload"]["concurrency"] is None
    validated = written.resolved["validated"]
    assert validated["run_id"] == outcome.sweep_id and validated["by"] == "sweep"
    summary = json.loads((outcome.archive / "summary.json").read_text())
    chosen_row = next(r for r in summary["steps"] if r["value"] == outcome.chosen.value)
    assert validated["metrics"]["qps"] == chosen_row["qps"]
    assert summary["tie_concurrency"] is True
    assert (outcome.archive / "plot.png").stat().st_size > 1000
    csv_lines = (outcome.archive / "summary.csv").read_text().splitlines()
    assert len(csv_lines) == len(measure.calls) + 1
    report = (outcome.archive / "report.md").read_text()
    assert "tied to max_num_seqs" in report and "**Choice**" in report
    assert summary["noise"]["values"] == 2 and "**Measured noise**" in report
    assert (outcome.archive / "recipe.given.yaml").read_text() == recipe.read_text()


def test_interrupt_then_resume_equals_uninterrupted(recipe, tmp_path):
    reference = sweep_once(recipe, tmp_path / "ref", FakeMeasure(), tmp_path / "ref.yaml")

    first = FakeMeasure(interrupt_at=4)
    with pytest.raises(KeyboardInterrupt):
        sweep_once(recipe, tmp_path / "runs", first, tmp_path / "out.yaml")
    [sweep_dir] = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]  # + index files
    status = json.loads((sweep_dir / "status.json").read_text())
    assert status["status"] == "interrupted" and "--resume" in status["resume"]
    assert not (tmp_path / "out.yaml").exists()

    second = FakeMeasure()
    resumed = resume_sweep(sweep_dir, measure=second)
    assert not set(first.calls) & set(second.calls)  # finished steps are not rerun
    assert first.calls + second.calls == [p["value"] for p in json.loads(
        (sweep_dir / "state.json").read_text())["history"]]
    assert resumed.chosen.value == reference.chosen.value
    ours = yaml.safe_load((tmp_path / "out.yaml").read_text())
    theirs = yaml.safe_load((tmp_path / "ref.yaml").read_text())
    for doc in (ours, theirs):
        doc["validated"].pop("at")
        doc["validated"].pop("run_id")
    assert ours == theirs


def test_resume_of_a_finished_or_missing_sweep_is_a_usage_error(recipe, tmp_path):
    from model_optimizer.errors import UsageError
    done = sweep_once(recipe, tmp_path / "runs", FakeMeasure(), tmp_path / "o.yaml")
    with pytest.raises(UsageError, match="already finished"):
        resume_sweep(done.archive)
    with pytest.raises(UsageError, match="not a resumable sweep"):
        resume_sweep(tmp_path)


def test_a_ctrl_c_while_the_outputs_are_written_leaves_a_sealed_archive(recipe, tmp_path,
                                                                       monkeypatch):
    import os
    import signal

    from model_optimizer.search.sweep import loop

    real = loop.write_outputs

    def slow_outputs(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while plotting
        real(*args, **kwargs)

    monkeypatch.setattr(loop, "write_outputs", slow_outputs)
    with pytest.raises(KeyboardInterrupt):
        sweep_once(recipe, tmp_path / "runs", FakeMeasure(), tmp_path / "out.yaml")
    [sweep_dir] = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    assert json.loads((sweep_dir / "status.json").read_text())["status"] == "ok"
    assert (sweep_dir / "report.md").is_file() and (sweep_dir / "manifest.json").is_file()


def test_re_measurement_stops_at_the_launch_budget(recipe, tmp_path):
    measure = FakeMeasure()
    loaded = load_recipe(recipe, ["sweep.confirm_duration_s=0", "workload.concurrency=null",
                                  "sweep.max_launches=8", "sweep.strategy=relaunch"])
    outcome = start_sweep(loaded, tmp_path / "runs", flags=SweepFlags(start=1),
                          output=tmp_path / "o.yaml", measure=measure)
    assert len(measure.calls) == 8   # the budget, re-measurements included
    state = json.loads((outcome.archive / "state.json").read_text())
    cut = [d for d in state["decisions"] if d["phase"] == "remeasure" and d["value"] is None]
    assert cut and cut[0]["stop_rule"] == "budget"
    summary = json.loads((outcome.archive / "summary.json").read_text())
    assert summary["strategy"] == "relaunch" and summary["stop"]["phase"] != "remeasure"


class DriftingMeasure(FakeMeasure):
    """Like FakeMeasure, but every window reads a little higher than the one before, so two
    windows of the same value have different figures."""

    def __call__(self, step, value):
        measured = super().__call__(step, value)
        drift = 0.01 * len(self.calls)
        figures = {**measured.figures, "qps": round(measured.figures["qps"] + drift, 3)}
        return Measurement("ok", samples=[figures["qps"]], slo_met=True, preemptions=0,
                           run_ids=measured.run_ids, figures=figures)


def test_summary_rows_carry_each_windows_own_figures(recipe, tmp_path):
    """A re-measured value has one row per window, each with that window's figures (the
    rows used to repeat the value's latest figures)."""
    outcome = sweep_once(recipe, tmp_path / "runs", DriftingMeasure(), tmp_path / "out.yaml")
    summary = json.loads((outcome.archive / "summary.json").read_text())
    remeasured = [r for r in summary["steps"] if r["phase"] == "remeasure"]
    assert len(remeasured) == 4
    for value in {r["value"] for r in remeasured}:
        rows = [r for r in summary["steps"] if r["value"] == value]
        assert len({r["qps"] for r in rows}) == len(rows) >= 2
    state = json.loads((outcome.archive / "state.json").read_text())
    assert [r["qps"] for r in summary["steps"]] == [f["qps"] for f in state["step_figures"]]


def test_a_choice_on_unknown_noise_is_not_resolved_and_strict_writes_nothing(recipe, tmp_path):
    """Seven launches grow 1..64 and leave none to re-measure; no sustained run (0 s): the
    noise is unknown. The revision is written with NOT RESOLVED in the reason, or, with
    --strict, nothing is written (exit 4)."""
    sets = ["sweep.confirm_duration_s=0", "workload.concurrency=null",
            "sweep.max_launches=7", "sweep.strategy=relaunch"]
    outcome = start_sweep(load_recipe(recipe, sets), tmp_path / "runs",
                          flags=SweepFlags(start=1), output=tmp_path / "a.yaml",
                          measure=FakeMeasure())
    summary = json.loads((outcome.archive / "summary.json").read_text())
    assert outcome.written == tmp_path / "a.yaml" and summary["resolved"] is False
    assert "NOT RESOLVED" in outcome.reason and "noise is unknown" in outcome.reason
    strict = start_sweep(load_recipe(recipe, sets), tmp_path / "runs",
                         flags=SweepFlags(start=1, strict=True), output=tmp_path / "b.yaml",
                         measure=FakeMeasure())
    assert strict.exit_code == 4 and strict.written is None
    assert not (tmp_path / "b.yaml").exists() and "--strict: nothing written" in strict.reason
    assert json.loads((strict.archive / "summary.json").read_text())["resolved"] is False
