"""A kv_cache_dtype sweep with the quality gate: fake runs and evals, the real sweep loop.

The real thing (vLLM, real evals) is tests/integration/test_quality.py; this checks the
wiring fast: the failing candidate is a recorded, explained step without a load test, the
written revision keeps the passing value and carries the gate's verdict, and the baseline is
evaluated once and remembered in state.json.
"""

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import model_optimizer.search.measure as measure_module
from model_optimizer.quality import search_gate
from model_optimizer.quality.gate import GateResult
from model_optimizer.recipe import load_recipe
from model_optimizer.runner import RunOutcome
from model_optimizer.search.sweep.flags import SweepFlags
from model_optimizer.search.sweep.loop import start_sweep
from tests.unit.conftest import AVX2_FLAGS

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def recipe(tmp_path):
    path = tmp_path / "trained.yaml"
    path.write_text((ROOT / "recipes" / "tiny-trained-cpu.yaml").read_text()
                    .replace("../models/", f"{ROOT / 'models'}/")
                    .replace("../examples/", f"{ROOT / 'examples'}/"))
    return path


def test_a_candidate_failing_the_gate_is_an_explained_step_and_never_written(
        recipe, tmp_path, monkeypatch):
    launched, baselines = [], []

    def fake_run(step, runs_base, on_event=None, archive_extra=None, **kwargs):
        launched.append(step.resolved["engine"]["kv_cache_dtype"])
        metrics = {"qps": 20.0, "goodput_qps": 20.0, "slo_met": True, "output_tok_s": 640.0}
        return RunOutcome("ok", Path(runs_base) / "r", f"run-{len(launched)}", metrics)

    def fake_baseline(reference, config, runs_base, on_event=None):
        baselines.append(reference)
        return SimpleNamespace(run_id="base-eval")

    def fake_evaluate(step, *, config, baseline, runs_base, on_event):
        gate = GateResult(False, {"mean_kl": 0.0123, "top1_agreement": 1.0},
                          ["mean KL 0.0123 above the maximum 0"], baseline_run="base-eval",
                          candidate_run="fp8-eval")
        return SimpleNamespace(gate=gate)

    monkeypatch.setattr(measure_module, "run_recipe", fake_run)
    monkeypatch.setattr(search_gate, "load_baseline", fake_baseline)
    monkeypatch.setattr(search_gate, "evaluate", fake_evaluate)
    loaded = load_recipe(recipe, ["quality.thresholds.max_mean_kl=0"])
    outcome = start_sweep(loaded, tmp_path / "runs", flags=SweepFlags(values=("auto", "fp8")))
    assert launched == ["auto"]                  # fp8 was never load-tested
    assert len(baselines) == 1
    assert outcome.chosen.value == "auto" and outcome.written == recipe
    assert "fp8 failed the quality gate (quality gate failed: mean KL 0.0123" in outcome.reason
    state = yaml.safe_load((outcome.archive / "state.json").read_text())
    assert state["quality_baseline"] == "base-eval"
    assert state["figures"]["fp8"]["status"] == "failed:quality"
    assert state["figures"]["auto"]["quality"]["passed"] is True
    written = load_recipe(recipe).resolved
    assert written["engine"]["kv_cache_dtype"] == "auto" and written["revision"] == 2
    assert written["validated"]["quality"]["passed"] is True
    assert "no output-changing field" in written["validated"]["quality"]["reasons"][0]
    summary = (outcome.archive / "summary.csv").read_text()
    assert "fp8" in summary and "quality" in summary


def test_a_value_this_cpu_cannot_run_is_skipped_before_any_eval_or_launch(
        recipe, tmp_path, monkeypatch, cpu_flags_are):
    """fp8 KV on an AVX2-only CPU: vLLM would stop at start, so neither the gate's eval nor
    the load test launches it; the step says why."""
    cpu_flags_are(AVX2_FLAGS)
    launched, evaluated = [], []

    def fake_run(step, runs_base, on_event=None, archive_extra=None, **kwargs):
        launched.append(step.resolved["engine"]["kv_cache_dtype"])
        metrics = {"qps": 20.0, "goodput_qps": 20.0, "slo_met": True, "output_tok_s": 640.0}
        return RunOutcome("ok", Path(runs_base) / "r", f"run-{len(launched)}", metrics)

    monkeypatch.setattr(measure_module, "run_recipe", fake_run)
    monkeypatch.setattr(search_gate, "load_baseline",
                        lambda *a, **k: SimpleNamespace(run_id="base-eval"))
    monkeypatch.setattr(search_gate, "evaluate", lambda step, **k: evaluated.append(step))
    outcome = start_sweep(load_recipe(recipe), tmp_path / "runs",
                          flags=SweepFlags(values=("auto", "fp8")))
    assert launched == ["auto"] and evaluated == []
    assert outcome.chosen.value == "auto"
    state = yaml.safe_load((outcome.archive / "state.json").read_text())
    assert state["figures"]["fp8"]["status"] == "skipped"
    assert "needs AVX-512 or AMX" in state["figures"]["fp8"]["reason"]


def test_a_tune_trial_failing_the_gate_is_infeasible(recipe, tmp_path, monkeypatch):
    from model_optimizer.search.tune.loop import start_tune

    recipe.write_text(recipe.read_text() + (
        "tune:\n  params:\n    kv_cache_dtype: {type: categorical, choices: [auto, fp8]}\n"
        "  sampler: grid\n  n_trials: 2\n"))
    launched = []

    def fake_run(step, runs_base, on_event=None, archive_extra=None, **kwargs):
        launched.append(step.resolved["engine"]["kv_cache_dtype"])
        metrics = {"qps": 20.0, "goodput_qps": 20.0, "slo_met": True, "output_tok_s": 640.0,
                   "ttft_p99_ms": 100.0, "success_rate": 1.0}
        return RunOutcome("ok", Path(runs_base) / "r", f"run-{len(launched)}", metrics)

    def fake_evaluate(step, *, config, baseline, runs_base, on_event):
        return SimpleNamespace(gate=GateResult(False, {"mean_kl": 0.5}, ["mean KL 0.5 above"],
                                               baseline_run="b", candidate_run="c"))

    monkeypatch.setattr(measure_module, "run_recipe", fake_run)
    monkeypatch.setattr(search_gate, "load_baseline",
                        lambda *a, **k: SimpleNamespace(run_id="base-eval"))
    monkeypatch.setattr(search_gate, "evaluate", fake_evaluate)
    outcome = start_tune(load_recipe(recipe), tmp_path / "runs")
    assert launched == ["auto"]
    written = load_recipe(recipe).resolved
    assert written["engine"]["kv_cache_dtype"] == "auto"
    assert written["validated"]["by"] == "tune" and written["validated"]["quality"]["passed"]
    trials = (outcome.archive / "trials.csv").read_text()
    assert "quality" in trials
