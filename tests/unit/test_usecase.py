"""The use-case layer's own rules (``model_optimizer/usecase``): what each entry function
refuses before anything launches, and the exit code it merges."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from model_optimizer.errors import EXIT_SLO_FAILED, EXIT_USAGE, UsageError
from model_optimizer.export import ExportOptions
from model_optimizer.usecase import (
    ApplyResult,
    Notice,
    capacity,
    export,
    needs_retune,
    optimize,
    sweep,
    tune,
    verify,
)
from model_optimizer.usecase.notices import DRIFT, INIT, tell
from model_optimizer.usecase.optimize import recipe_for

ROOT = Path(__file__).resolve().parents[2]


def test_a_resumed_sweep_takes_no_recipe_and_a_new_one_needs_one(tmp_path):
    with pytest.raises(UsageError, match="give no RECIPE or --set"):
        sweep(Path("recipes/tiny-cpu.yaml"), resume=tmp_path)
    with pytest.raises(UsageError, match="give no RECIPE or --set"):
        sweep(overrides=["engine.max_num_seqs=8"], resume=tmp_path)
    with pytest.raises(UsageError, match="give a recipe"):
        sweep()


def test_a_resumed_tune_takes_only_a_larger_budget_and_a_new_one_needs_a_recipe(tmp_path):
    from model_optimizer.search.tune.space import TuneFlags

    for flags in (TuneFlags(sampler="random"), TuneFlags(seed=1), TuneFlags(max_minutes=5),
                  TuneFlags(strategy="scan")):
        with pytest.raises(UsageError, match="give no RECIPE, --set, --sampler"):
            tune(flags=flags, resume=tmp_path)
    with pytest.raises(UsageError, match="give no RECIPE, --set, --sampler"):
        tune(Path("recipes/tiny-cpu.yaml"), resume=tmp_path)
    with pytest.raises(UsageError, match="give a recipe"):
        tune(flags=TuneFlags(n_trials=4))


def test_each_notice_is_told_in_order_and_kept():
    told: list[Notice] = []
    assert tell(told.append, DRIFT, iter(["a", "b"])) == ["a", "b"]
    assert told == [Notice(DRIFT, "a"), Notice(DRIFT, "b")]
    assert tell(None, DRIFT, ["c"]) == ["c"]


class _Outcome:
    def __init__(self, code: int):
        self.exit_code = code


class _Eval:
    def __init__(self, ok: bool, passed: bool | None):
        self.result = type("R", (), {"ok": ok})()
        self.gate = None if passed is None else type("G", (), {"passed": passed})()


def test_apply_s_exit_code_is_the_run_s_unless_quality_failed_a_run_that_met_its_slos():
    assert ApplyResult(_Outcome(0)).exit_code == 0  # type: ignore[arg-type]
    assert ApplyResult(_Outcome(0), _Eval(True, True)).exit_code == 0  # type: ignore[arg-type]
    assert ApplyResult(_Outcome(0), _Eval(True, False)).exit_code == EXIT_SLO_FAILED  # type: ignore[arg-type]
    assert ApplyResult(_Outcome(0), _Eval(False, None)).exit_code == EXIT_SLO_FAILED  # type: ignore[arg-type]
    assert ApplyResult(_Outcome(3), _Eval(False, None)).exit_code == 3  # type: ignore[arg-type]


def test_verify_refuses_a_revision_never_validated_before_anything_is_archived(tmp_path):
    runs = tmp_path / "runs"
    with pytest.raises(UsageError, match="has no validated block"):
        verify(ROOT / "recipes" / "tiny-cpu.yaml", runs_base=runs, force=True)
    assert not runs.exists()


def test_only_a_regression_is_retuned():
    assert needs_retune(SimpleNamespace(exit_code=EXIT_SLO_FAILED))  # type: ignore[arg-type]
    for code in (0, EXIT_USAGE, 3, 5):  # holds, not judged (client-bound), a failed run
        assert not needs_retune(SimpleNamespace(exit_code=code))  # type: ignore[arg-type]


def test_capacity_refuses_a_rate_that_sizes_nothing_and_a_launch_without_a_recipe(tmp_path):
    runs = tmp_path / "runs"
    for rate in (0, -2.5):
        with pytest.raises(UsageError, match="give a rate above 0 req/s"):
            capacity(ROOT / "recipes" / "tiny-cpu.yaml", target_rate=rate, runs_base=runs)
    with pytest.raises(UsageError, match="give a recipe to launch, or the url"):
        capacity(runs_base=runs)
    assert not runs.exists()


def test_a_fleet_s_export_takes_no_overrides_and_writes_nothing(tmp_path):
    with pytest.raises(UsageError, match="--set is for recipes"):
        export(ROOT / "recipes" / "tiny-cpu-fleet.yaml", tmp_path / "out",
               ExportOptions(("vllm",)), overrides=["engine.max_num_seqs=8"],
               runs_base=tmp_path / "runs")
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()


def test_optimize_refuses_a_target_beside_resume_and_needs_one_without(tmp_path):
    with pytest.raises(UsageError, match=re.escape("give no MODEL_DIR|RECIPE or --set")):
        optimize(Path("recipes/tiny-cpu.yaml"), resume=tmp_path)
    with pytest.raises(UsageError, match=re.escape("give no MODEL_DIR|RECIPE or --set")):
        optimize(overrides=["engine.max_num_seqs=8"], resume=tmp_path)
    with pytest.raises(UsageError, match="give a MODEL_DIR or RECIPE"):
        optimize()


def test_a_model_folder_s_recipe_is_written_once_and_told(tmp_path, tiny_model_dir):
    told: list[Notice] = []
    recipe = recipe_for(tiny_model_dir, tmp_path / "tiny.yaml", told.append)
    assert recipe == tmp_path / "tiny.yaml" and recipe.is_file()
    [notice] = told
    assert notice.kind == INIT and notice.text.startswith(f"wrote {recipe} with `mopt init`")
    assert recipe_for(recipe, None, told.append) == recipe and len(told) == 1  # a file as is
    with pytest.raises(UsageError, match="exists; optimize it with"):
        optimize(tiny_model_dir, output=recipe, runs_base=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()
