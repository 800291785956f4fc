"""A whole tune on the mock engine: an optuna grid over max_num_seqs with real launches
(mopt's mock server for vLLM, its batch capped at 4), the best feasible trial written as the
next revision, trials archived, the archive sealed, no process left behind.
"""

from __future__ import annotations

import csv
import io

import psutil
import pytest
import yaml
from rich.console import Console

import model_optimizer.engine.factory as factory
from model_optimizer.cli.tune import TuneProgress
from model_optimizer.engine.factory import MockEngine
from model_optimizer.events import TuneTrial, TuneTrialDone
from model_optimizer.search.tune.loop import start_tune
from tests.unit.cli.test_progress_handlers import RUN_PHASES
from tests.unit.mock_engine import mock_recipe

TUNE = """\
tune:
  params:
    max_num_seqs: {type: categorical, choices: [1, 4]}
  sampler: grid
  n_trials: 2
  strategy: relaunch   # one launch per trial (scanning: test_tune_scan.py)
"""


@pytest.fixture
def mock_engine(monkeypatch):
    """Every run of this test serves with the mock engine (capacity 4)."""
    engine = MockEngine(ttft_ms=50, itl_ms=5, capacity=4)
    monkeypatch.setattr(factory, "VllmEngine", lambda: engine)
    return engine


@pytest.mark.slow  # several seconds: real processes (quick tier: not slow)
def test_a_tune_measures_every_trial_and_writes_the_best(tmp_path, tiny_model_dir,
                                                         mock_engine):
    loaded = mock_recipe(tmp_path, tiny_model_dir, TUNE)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    events = []
    outcome = start_tune(loaded, tmp_path / "runs", output=tmp_path / "tuned.yaml",
                         on_event=lambda event: events.append(type(event)))
    assert outcome.written == tmp_path / "tuned.yaml", outcome.reason
    written = yaml.safe_load((tmp_path / "tuned.yaml").read_text())
    assert written["engine"]["max_num_seqs"] == 4  # 4 in flight beat 1 by far
    assert written["validated"]["by"] == "tune" and written["revision"] == 2
    archive = outcome.archive
    rows = list(csv.DictReader((archive / "trials.csv").open()))
    assert len(rows) == 2
    steps = [p for p in (archive / "steps").iterdir() if p.is_dir()]
    assert len(steps) == 2 and all((s / "engine.log").is_file() for s in steps)
    assert (archive / "manifest.json").is_file() and (archive / "study.db").is_file()
    after = {p.pid for p in psutil.Process().children(recursive=True)
             if p.status() != psutil.STATUS_ZOMBIE}
    assert after <= before
    assert {TuneTrial, TuneTrialDone} <= set(events)
    shown = set(TuneProgress(Console(file=io.StringIO())).handlers()) | RUN_PHASES
    assert set(events) <= shown, set(events) - shown  # every phase has a display
