"""`mopt optimize` orchestration with the engine and the quantizer stood in for.

The real pipeline (vLLM, llm-compressor, sweep) runs in tests/integration/test_optimize.py;
here measurements are scripted so the stage logic, the survivor choice, the written
revision, the report and resume after Ctrl-C are checked exactly.
"""

from __future__ import annotations

import json
import sys

import pytest
import yaml

import model_optimizer.optimize.pipeline as pipeline_module
from model_optimizer.archive.index import all_rows
from model_optimizer.archive.manifest import verify_archive
from model_optimizer.measure import Measurement
from model_optimizer.models.pins import checkpoint_hash
from model_optimizer.optimize.pipeline import resume_optimize, start_optimize
from model_optimizer.recipe import load_recipe

from ..quantize.test_run import FAKE

QPS = {"baseline": 10.0, "w4a16": 12.0, "kv-fp8": 11.0}


@pytest.fixture
def project(tmp_path, monkeypatch):
    model = tmp_path / "models" / "m"
    model.mkdir(parents=True)
    (model / "config.json").write_text(json.dumps(
        {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
         "num_attention_heads": 2, "vocab_size": 100, "torch_dtype": "bfloat16"}))
    (model / "model.safetensors").write_bytes(b"\x00" * 32)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({
        "recipe_version": 1, "name": "r", "model": {"path": "models/m"},
        "engine": {"block_size": 32, "max_num_seqs": 4,
                   "env": {"VLLM_CPU_KVCACHE_SPACE": "1"}},
        "hardware": {"accelerator": "cpu", "memory_gib": 4},
        "optimize": {"sweep": False, "candidates": [
            {"name": "w4a16", "quantize": {"scheme": "w4a16"}},
            {"name": "kv-fp8", "kv_cache_dtype": "fp8"},
            {"name": "nv", "quantize": {"scheme": "nvfp4"}},
            {"name": "kv-int8", "kv_cache_dtype": "int8_per_token_head"}]}}))
    fake = tmp_path / "fake-python"
    fake.write_text(f"#!{sys.executable}\n" + FAKE)
    fake.chmod(0o755)
    monkeypatch.setenv("MOPT_QUANT_PYTHON", str(fake))
    return tmp_path


def scripted(calls, interrupt_on=None):
    def measure(step, runs_base, **_kwargs):
        model = step.resolved["model"]
        name = ("w4a16" if model["quantization"] == "compressed-tensors" else
                "kv-fp8" if step.resolved["engine"]["kv_cache_dtype"] == "fp8" else "baseline")
        calls.append(name)
        if name == interrupt_on:
            raise KeyboardInterrupt
        return Measurement("ok", [QPS[name]], True, run_ids=[f"run-{name}"],
                           figures={"qps": QPS[name], "ttft_p99_ms": 50.0,
                                    "peak_memory_bytes": 2**30, "status": "ok"})
    return measure


def test_stages_survivor_revision_and_report(project, monkeypatch):
    calls = []
    monkeypatch.setattr(pipeline_module, "measure_configuration", scripted(calls))
    outcome = start_optimize(load_recipe(project / "r.yaml"), project / "runs")
    assert outcome.exit_code == 0, outcome.reason
    assert calls == ["baseline", "w4a16", "kv-fp8"]  # GPU-only ones never launched
    assert outcome.survivor == "w4a16"
    rows = {row["stage"]: row for row in outcome.rows}
    assert rows["nv"]["status"].startswith("skipped: quantize.scheme nvfp4 is GPU-only")
    assert rows["kv-int8"]["status"].startswith("skipped: kv_cache_dtype int8_per_token_head")
    assert rows["w4a16"]["quality"].startswith("not gated")
    written = load_recipe(project / "r.yaml")
    model = written.resolved["model"]
    assert written.resolved["revision"] == 2
    assert model["path"] == "models/m-w4a16"
    assert model["pins"]["sha256"] == checkpoint_hash(project / "models" / "m-w4a16").sha256
    validated = written.resolved["validated"]
    assert (validated["by"], validated["run_id"]) == ("optimize", outcome.pipeline_id)
    assert validated["metrics"]["qps"] == 12.0
    archive = outcome.archive
    for name in ("report.md", "summary.csv", "plot.png", "state.json", "recipe.written.yaml"):
        assert (archive / name).is_file(), name
    assert "| **w4a16** (survivor) |" in (archive / "report.md").read_text()
    assert verify_archive(archive) == []
    assert json.loads((archive / "status.json").read_text())["kind"] == "optimize"
    [row] = [r for r in all_rows(project / "runs") if r["kind"] == "optimize"]
    assert (row["qps"], row["recipe_revision"], row["status"]) == (12.0, 2, "ok")
    kinds = {r["kind"] for r in all_rows(project / "runs")}
    assert "quantize" in kinds


def test_the_baseline_survives_when_it_is_fastest(project, monkeypatch):
    monkeypatch.setitem(QPS, "baseline", 20.0)
    monkeypatch.setattr(pipeline_module, "measure_configuration", scripted([]))
    outcome = start_optimize(load_recipe(project / "r.yaml"), project / "runs")
    assert outcome.survivor == "baseline"
    assert load_recipe(project / "r.yaml").resolved["model"]["path"] == "models/m"
    best = start_optimize(load_recipe(project / "r.yaml", ["optimize.survivor=best_candidate",
                                                          "quantize.output=models/again"]),
                          project / "runs")
    assert best.survivor == "w4a16"


def test_interrupted_pipeline_resumes_without_redoing_stages(project, monkeypatch):
    calls = []
    monkeypatch.setattr(pipeline_module, "measure_configuration",
                        scripted(calls, interrupt_on="kv-fp8"))
    with pytest.raises(KeyboardInterrupt):
        start_optimize(load_recipe(project / "r.yaml"), project / "runs")
    [archive] = [p for p in (project / "runs").iterdir() if p.is_dir()]
    assert json.loads((archive / "status.json").read_text())["status"] == "interrupted"
    quantized_once = list((archive / "steps").glob("*"))
    calls.clear()
    monkeypatch.setattr(pipeline_module, "measure_configuration", scripted(calls))
    outcome = resume_optimize(archive)
    assert calls == ["kv-fp8"]  # baseline and w4a16 (and its checkpoint) were not redone
    assert list((archive / "steps").glob("*")) == quantized_once
    assert outcome.exit_code == 0 and outcome.survivor == "w4a16"
    with pytest.raises(Exception, match="already finished"):
        resume_optimize(archive)


def test_an_error_in_a_stage_still_closes_the_pipeline_archive(project, monkeypatch):
    """Whatever stops a stage, the pipeline's record is saved, marked and sealed (its
    stages are archives of their own), and --resume goes on from there."""
    def broken(step, runs_base, **_kwargs):
        if step.resolved["engine"]["kv_cache_dtype"] == "fp8":
            raise RuntimeError("the measuring step broke")
        return scripted([])(step, runs_base)

    monkeypatch.setattr(pipeline_module, "measure_configuration", broken)
    with pytest.raises(RuntimeError, match="measuring step broke"):
        start_optimize(load_recipe(project / "r.yaml"), project / "runs")
    [archive] = [p for p in (project / "runs").iterdir() if p.is_dir()]
    status = json.loads((archive / "status.json").read_text())
    assert status["status"] == "interrupted"
    assert status["resume"] == f"mopt optimize --resume {archive}"
    assert verify_archive(archive) == []
    assert list(json.loads((archive / "state.json").read_text())["stages"]) == \
        ["baseline", "w4a16"]
    assert (archive / "report.md").is_file()
    calls = []
    monkeypatch.setattr(pipeline_module, "measure_configuration", scripted(calls))
    assert resume_optimize(archive).exit_code == 0 and calls == ["kv-fp8"]


def test_a_bad_candidate_is_refused_before_anything_runs(project, monkeypatch):
    calls = []
    monkeypatch.setattr(pipeline_module, "measure_configuration", scripted(calls))
    bad = load_recipe(project / "r.yaml",
                      ['optimize.candidates=[{"name": "x", "quantize": {"scheme": "int3"}}]'])
    with pytest.raises(Exception, match="optimize.candidates x"):
        start_optimize(bad, project / "runs")
    assert calls == [] and not (project / "runs").exists()


class FakeQuality:
    """Stands in for model_optimizer.quality: the baseline eval, then a verdict per candidate."""

    def __init__(self, passes: bool):
        self.passes, self.gated = passes, []

    def quality_of(self, loaded):
        from dataclasses import make_dataclass

        config = make_dataclass("Config", [("enabled", bool), ("baseline", object)])
        return config(True, "elsewhere.yaml")

    def evaluate(self, loaded, *, config, runs_base, on_event=None):
        from types import SimpleNamespace

        assert config.baseline is None  # the reference is not compared with anything
        result = SimpleNamespace(ok=True, run_id="eval-baseline",
                                 figures=lambda: {"accuracy": 0.5})
        return SimpleNamespace(result=result)

    def gate(self, candidate, baseline, *, config, runs_base, on_event=None):
        from types import SimpleNamespace

        self.gated.append((candidate.resolved["model"]["quantization"], baseline.run_id))
        return SimpleNamespace(passed=self.passes, figures={"top1_agreement": 0.4},
                               reasons=[] if self.passes else ["top-1 agreement 0.4 < 0.9"],
                               candidate_run="eval-candidate")


@pytest.mark.parametrize("passes", [True, False])
def test_candidates_are_gated_against_the_baseline_eval(project, monkeypatch, passes):
    import model_optimizer.optimize.gate as gate_module

    fake = FakeQuality(passes)
    monkeypatch.setattr(gate_module, "_quality", lambda: fake)
    monkeypatch.setattr(pipeline_module, "measure_configuration", scripted([]))
    recipe = load_recipe(project / "r.yaml", ['optimize.candidates=[{"name": "w4a16", '
                                              '"quantize": {"scheme": "w4a16"}}]',
                                              "quality.eval_set=set.jsonl"])
    outcome = start_optimize(recipe, project / "runs")
    assert fake.gated == [("compressed-tensors", "eval-baseline")]
    rows = {row["stage"]: row for row in outcome.rows}
    assert rows["baseline"]["quality"] == "reference (accuracy 0.500)"
    if passes:
        assert outcome.survivor == "w4a16"
        assert rows["w4a16"]["quality"] == "passed (top1_agreement 0.400)"
    else:  # a failing candidate never survives, whatever its speed
        assert outcome.survivor == "baseline"
        assert rows["w4a16"]["status"] == "gated: top-1 agreement 0.4 < 0.9"
        assert rows["w4a16"]["quality"].startswith("FAILED: top-1 agreement")
