"""Which search candidates the quality gate evaluates, and how a failure is recorded."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from model_optimizer.quality import search_gate
from model_optimizer.quality.config import changes_outputs
from model_optimizer.quality.gate import GateResult
from model_optimizer.quality.search_gate import SearchGate, changed_fields
from model_optimizer.recipe import load_recipe
from model_optimizer.search.measure import measure_configuration

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def recipe(tmp_path):
    path = tmp_path / "trained.yaml"
    path.write_text((ROOT / "recipes" / "tiny-trained-cpu.yaml").read_text()
                    .replace("../models/", f"{ROOT / 'models'}/")
                    .replace("../examples/", f"{ROOT / 'examples'}/"))
    return load_recipe(path)


def test_output_changing_fields():
    assert changes_outputs(["engine.kv_cache_dtype", "engine.max_num_seqs", "model.dtype",
                            "engine.extra_args.speculative-config.method",
                            "engine.block_size", "model.quantization"]) == [
        "engine.kv_cache_dtype", "model.dtype", "engine.extra_args.speculative-config.method",
        "model.quantization"]


def test_changed_fields_ignore_bookkeeping_and_load(recipe):
    other = recipe.varied({"engine.max_num_seqs": 2, "workload.concurrency": 2,
                           "engine.kv_cache_dtype": "fp8", "quality.seed": 3}, "test")
    assert changed_fields(recipe.resolved, other.resolved) == [
        "engine.kv_cache_dtype", "engine.max_num_seqs"]


def test_scheduling_knobs_pass_without_an_eval(recipe, tmp_path, monkeypatch):
    monkeypatch.setattr(search_gate, "evaluate", lambda *a, **k: pytest.fail("evaluated"))
    gate = SearchGate(recipe, tmp_path)
    verdict = gate.check(recipe.varied({"engine.max_num_seqs": 2}, "test"))
    assert verdict.passed and "not evaluated" in verdict.reasons[0]


def test_no_quality_section_means_no_gate(tmp_path):
    plain = load_recipe(ROOT / "recipes" / "tiny-cpu.yaml")
    fp8 = plain.varied({"engine.kv_cache_dtype": "fp8"}, "test")
    assert SearchGate(plain, tmp_path).check(fp8) is None


def test_an_output_changing_candidate_is_evaluated_against_one_baseline(recipe, tmp_path,
                                                                        monkeypatch):
    baselines, evaluated = [], []

    def fake_baseline(reference, config, runs_base, on_event=None):
        baselines.append(reference)
        return SimpleNamespace(run_id="base-1")

    def fake_evaluate(step, *, config, baseline, runs_base, on_event):
        evaluated.append((step.resolved["engine"]["kv_cache_dtype"], baseline.run_id))
        gate = GateResult(False, {"mean_kl": 0.2}, ["mean KL 0.2 above the maximum 0.05"],
                          baseline_run="base-1", candidate_run="cand-1")
        return SimpleNamespace(gate=gate)

    monkeypatch.setattr(search_gate, "load_baseline", fake_baseline)
    monkeypatch.setattr(search_gate, "evaluate", fake_evaluate)
    gate = SearchGate(recipe, tmp_path)
    fp8 = recipe.varied({"engine.kv_cache_dtype": "fp8"}, "test")
    first, second = gate.check(fp8), gate.check(fp8)
    assert baselines == [recipe] and gate.baseline_run == "base-1"
    assert evaluated == [("fp8", "base-1"), ("fp8", "base-1")]
    assert not first.passed and first.figures["gated_fields"] == ["engine.kv_cache_dtype"]
    measured = measure_configuration(fp8, tmp_path, repeats=1, objective="qps",
                                     quality_gate=gate.check)
    assert (measured.status, measured.failure_kind) == ("failed", "quality")
    assert measured.run_ids == [] and "mean KL 0.2 above" in measured.reason
    assert measured.figures["quality"]["passed"] is False and second.summary.startswith(
        "quality gate failed")
