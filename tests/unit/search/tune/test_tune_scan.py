"""Scanning trials on the mock engine (real processes, real HTTP, real archives, no vLLM):
with max_num_seqs in the space, one trial is one launch of the other knobs that measures
every max_num_seqs level on that server; each level is its own trial of the study; the best
is confirmed by a launch of its own; an interrupted scan resumes without measuring a level
twice; an invalid workload falls back to one launch per trial.
"""

from __future__ import annotations

import csv
import json

import optuna
import pytest
import yaml

import model_optimizer.engine.factory as factory
from model_optimizer.archive.names import SUMMARY_FILE
from model_optimizer.engine.factory import MockEngine
from model_optimizer.errors import UsageError
from model_optimizer.events import LevelDone
from model_optimizer.search.tune.loop import resume_tune, start_tune
from model_optimizer.search.tune.scan import scan_grid, scan_levels
from model_optimizer.search.tune.space import ParamSpec, TuneFlags
from model_optimizer.search.tune.study import budget_used
from tests.unit.mock_engine import alive, children_pids, mock_recipe

SPACE = """\
tune:
  params:
    max_num_seqs: {type: int_log, low: 1, high: 8}
    enable_prefix_caching: {type: categorical, choices: [false, true]}
  sampler: grid
  n_trials: 2
"""


@pytest.fixture
def mock_engine(monkeypatch):
    """Every launch serves with the mock engine: at most 4 sequences generate at once."""
    engine = MockEngine(ttft_ms=40, itl_ms=8, capacity=4)
    monkeypatch.setattr(factory, "VllmEngine", lambda: engine)
    return engine


def steps_by_kind(archive) -> dict[str, list[dict]]:
    """The run.json of every step of a search archive, by kind (server, bench, run)."""
    kinds: dict[str, list[dict]] = {}
    for step in sorted((archive / "steps").iterdir()):
        if (step / "run.json").is_file():
            data = json.loads((step / "run.json").read_text())
            kinds.setdefault(data.get("kind", "run"), []).append(data)
    return kinds


def test_levels_are_the_spaces_powers_of_two_under_the_ceiling():
    spec = ParamSpec("max_num_seqs", "int_log", 1, 64)
    assert scan_levels(spec, 64, 64) == [1, 2, 4, 8, 16, 32, 64]
    assert scan_levels(spec, 20, 12) == [1, 2, 4, 8, 12, 16]  # the asked value is a level
    assert scan_levels(ParamSpec("max_num_seqs", "categorical", choices=(6, 2)), 4, 2) == [2]
    grid = [{"max_num_seqs": m, "block_size": b} for b in (32, 64) for m in (1, 2, 4)]
    assert scan_grid(grid) == [{"max_num_seqs": 4, "block_size": 32},
                               {"max_num_seqs": 4, "block_size": 64}]


@pytest.mark.slow  # several seconds: real processes (quick tier: not slow)
def test_each_trial_is_one_launch_scanning_every_level(tmp_path, tiny_model_dir,
                                                       mock_engine):
    loaded = mock_recipe(tmp_path, tiny_model_dir, SPACE)
    before = children_pids()
    events: list = []
    outcome = start_tune(loaded, tmp_path / "runs", output=tmp_path / "tuned.yaml",
                         on_event=events.append)
    assert outcome.written == tmp_path / "tuned.yaml", outcome.reason
    archive = outcome.archive
    kinds = steps_by_kind(archive)
    # two launches (one per enable_prefix_caching value) at max_num_seqs 8, four windows
    # each, and one launch of the winner's own configuration
    assert [s["params"]["max_num_seqs"] for s in kinds["server"]] == [8, 8]
    assert sorted(s["level"] for s in kinds["bench"]) == [1, 1, 2, 2, 4, 4, 8, 8]
    assert all(s["server_run"] for s in kinds["bench"])
    confirms = [s for s in kinds.get("run", []) if s.get("confirm")]
    assert len(confirms) >= 1
    summary = json.loads((archive / SUMMARY_FILE).read_text())
    assert summary["scan"] and summary["windows"] == 8
    assert summary["launches"] == 2  # the confirmation is counted apart, in confirmations
    assert all(c["ok"] for c in summary["confirmations"])  # the best (and its runner-up)
    assert summary["confirmation"]["chosen"] == summary["best"]
    study = optuna.load_study(study_name=summary["study"],
                              storage=f"sqlite:///{archive / 'study.db'}")
    trials = study.get_trials()
    assert len(trials) == 8 and budget_used(trials) == 2  # levels do not use the budget
    levels = [t for t in trials if t.user_attrs.get("scan_level")]
    assert len(levels) == 6 and {t.user_attrs["launch"] for t in levels} == {0, 1}
    rows = list(csv.DictReader((archive / "trials.csv").open()))
    assert {r["launch"] for r in rows} == {"0", "1"}
    qps = {(t.params["max_num_seqs"], t.params["enable_prefix_caching"]): t.values[0]
           for t in trials}
    assert qps[(4, False)] > 2 * qps[(1, False)]  # the batch fills up to the mock's 4
    written = yaml.safe_load((tmp_path / "tuned.yaml").read_text())
    assert written["engine"]["max_num_seqs"] in (4, 8)  # past 4 the mock batches no more
    [own] = [c for c in summary["confirmations"]  # the revision carries its confirming figures
             if all(written["engine"][k] == v for k, v in c["params"].items())]
    assert written["validated"]["metrics"]["qps"] == own["figures"]["qps"]
    assert "level scanned on launch #0" in (archive / "report.md").read_text()
    assert not alive(children_pids() - before)


class InterruptAt:
    """Raises Ctrl-C at the ``at``-th measured level (after it was told to the study)."""

    def __init__(self, at: int):
        self.at, self.seen = at, 0

    def __call__(self, event) -> None:
        if isinstance(event, LevelDone):
            self.seen += 1
            if self.seen == self.at:
                raise KeyboardInterrupt


@pytest.mark.slow  # several seconds: real processes (quick tier: not slow)
def test_an_interrupted_scan_resumes_without_measuring_a_level_twice(tmp_path,
                                                                     tiny_model_dir,
                                                                     mock_engine):
    loaded = mock_recipe(tmp_path, tiny_model_dir, SPACE.replace("n_trials: 2",
                                                                 "n_trials: 1"))
    before = children_pids()
    with pytest.raises(KeyboardInterrupt):
        start_tune(loaded, tmp_path / "runs", output=tmp_path / "tuned.yaml",
                   on_event=InterruptAt(2))
    assert not alive(children_pids() - before)  # the scan server is stopped
    archive = next((tmp_path / "runs").glob("*-tune-*"))
    assert len(steps_by_kind(archive)["bench"]) == 2
    outcome = resume_tune(archive)
    assert outcome.written is not None, outcome.reason
    kinds = steps_by_kind(archive)
    assert sorted(s["level"] for s in kinds["bench"]) == [1, 2, 4, 8]  # none twice
    assert len(kinds["server"]) == 2  # the interrupted launch and the resumed one
    summary = json.loads((archive / SUMMARY_FILE).read_text())
    assert summary["windows"] == 4 and summary["launches"] == 2
    assert not alive(children_pids() - before)


@pytest.mark.slow  # several seconds: real processes (quick tier: not slow)
def test_an_open_loop_or_fixed_concurrency_load_launches_per_trial(tmp_path, tiny_model_dir,
                                                                   mock_engine):
    loaded = mock_recipe(tmp_path, tiny_model_dir, SPACE, ["workload.concurrency=2"])
    with pytest.raises(UsageError, match="workload.concurrency is set"):
        start_tune(loaded, tmp_path / "runs", flags=TuneFlags(strategy="scan"))
    outcome = start_tune(loaded, tmp_path / "runs", output=tmp_path / "tuned.yaml")
    summary = json.loads((outcome.archive / SUMMARY_FILE).read_text())
    assert not summary["scan"] and "not valid" in summary["strategy"]
    kinds = steps_by_kind(outcome.archive)
    assert "server" not in kinds and "bench" not in kinds
    assert len(kinds["run"]) == summary["launches"] == 2  # two trials, a launch each


KV_TOO_SMALL = ("ValueError: To serve at least one request with the model's max seq len "
                "(512), (0.05 GiB KV cache is needed, which is larger than the available KV "
                "cache memory (0.01 GiB)")


@pytest.mark.parametrize(("log", "kind", "runs"), [
    # memory: the asked level (8) is the ceiling that did not fit: infeasible, not relaunched
    (KV_TOO_SMALL, "kv_cache_too_small", 0),
    # not memory: the asked configuration is launched alone
    ("api_server.py: error: unrecognized arguments: --bogus", "invalid_config", 1)])
def test_a_scan_server_that_does_not_start(tmp_path, tiny_model_dir, monkeypatch, log, kind,
                                           runs):
    engine = MockEngine(fail_start=log)
    monkeypatch.setattr(factory, "VllmEngine", lambda: engine)
    loaded = mock_recipe(tmp_path, tiny_model_dir, SPACE.replace("n_trials: 2",
                                                                 "n_trials: 1"))
    outcome = start_tune(loaded, tmp_path / "runs", output=tmp_path / "tuned.yaml")
    assert outcome.written is None  # nothing started: no feasible trial, nothing written
    kinds = steps_by_kind(outcome.archive)
    assert len(kinds["server"]) == 1 and "bench" not in kinds
    assert len(kinds.get("run", [])) == runs
    summary = json.loads((outcome.archive / SUMMARY_FILE).read_text())
    [row] = summary["trials"]
    assert row["status"] == "failed" and row["failure"] == kind
    assert summary["launches"] == 1 + runs and summary["windows"] == 0
