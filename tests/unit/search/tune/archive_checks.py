"""Checks on a tune's archives and study shared by the mock-engine and the real-vLLM tune tests."""

from __future__ import annotations

from pathlib import Path

import optuna
from optuna.trial import TrialState

from model_optimizer.recipe import load_recipe
from model_optimizer.search.tune.study import sqlite_url

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


def local_study(archive: Path) -> optuna.Study:
    return optuna.load_study(study_name=archive.name, storage=sqlite_url(archive / "study.db"))


def tune_archives(runs: Path) -> list[Path]:
    return sorted(p for p in runs.iterdir() if p.is_dir()) if runs.exists() else []


def assert_trials_archived(trials: list, archives: list[Path]) -> None:
    """Every launched trial's runs are archived, once, under the steps/ of one worker."""
    for trial in trials:
        for run_id in trial.user_attrs["run_ids"]:
            homes = [a for a in archives if (a / "steps" / run_id / "status.json").is_file()]
            assert len(homes) == 1, (trial.number, run_id, homes)
            assert homes[0].name == trial.user_attrs["worker"]


def assert_written_best(output: Path, study: optuna.Study, best_number: int) -> None:
    written = load_recipe(output)  # validates
    best = next(t for t in study.trials if t.number == best_number)
    assert best.user_attrs["feasible"]
    feasible = [t.values[0] for t in study.get_trials(states=FINISHED)
                if t.user_attrs.get("feasible")]
    assert best.values[0] == max(feasible)
    for name, value in best.params.items():
        assert written.resolved["engine"][name] == value
    assert written.resolved["validated"]["by"] == "tune"
