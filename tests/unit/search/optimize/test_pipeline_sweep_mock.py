"""`mopt optimize`'s last stage, the survivor's max_num_seqs sweep, on the mock engine.

The baseline and the candidates are scripted (as in test_pipeline.py); the sweep is real:
real launches of mopt's mock server (its batch capped at 2, a knee to find), real loads,
its own archive linked from the pipeline's, the chosen value in the written revision. The
real engine runs the sweep in tests/integration/test_probe_scan.py and the rest of the
pipeline in tests/integration/test_optimize.py (with ``optimize.sweep`` off, for CI's time).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

import model_optimizer.engine.factory as factory
import model_optimizer.search.optimize.pipeline as pipeline_module
from model_optimizer.archive.manifest import verify_archive
from model_optimizer.engine.factory import MockEngine
from model_optimizer.models.pins import checkpoint_hash
from model_optimizer.recipe import load_recipe
from model_optimizer.search.optimize.pipeline import start_optimize

from .test_pipeline import UNGATED, project, scripted  # noqa: F401 - the fixture

SWEEP = ["optimize.sweep=true", "sweep.start=1", "sweep.max=4", "sweep.max_launches=4",
         "sweep.strategy=relaunch", "sweep.confirm_duration_s=0", "sweep.remeasure_rounds=0",
         "workload.num_requests=16", "workload.warmup_requests=1",
         "workload.prompt_tokens=16", "workload.output_tokens=8"]


@pytest.mark.slow  # several seconds: real processes (quick tier: not slow)
def test_the_survivor_is_swept_on_its_own_checkpoint_and_the_revision_takes_the_knee(
        project, monkeypatch, tiny_model_dir):  # noqa: F811 - the fixture
    for name in ("tokenizer.json", "tokenizer_config.json"):  # the load counts tokens
        shutil.copy(tiny_model_dir / name, project / "models" / "m" / name)
    monkeypatch.setattr(factory, "VllmEngine",
                        lambda: MockEngine(ttft_ms=20, itl_ms=5, capacity=2))
    calls = []
    monkeypatch.setattr(pipeline_module, "measure_configuration", scripted(calls))
    outcome = start_optimize(load_recipe(project / "r.yaml", SWEEP), project / "runs",
                             **UNGATED)
    assert outcome.exit_code == 0, outcome.reason
    assert calls == ["baseline", "w4a16", "kv-fp8"] and outcome.survivor == "w4a16"

    state = json.loads((outcome.archive / "state.json").read_text())
    swept = state["stages"]["sweep"]
    assert swept["status"] == "ok" and swept["survivor"] == "w4a16"
    sweep_dir = Path(swept["sweep_dir"])
    assert sweep_dir.parent == outcome.archive / "steps" and verify_archive(sweep_dir) == []
    # every launch of the sweep served the survivor: its quantized checkpoint
    launched = [yaml.safe_load((step / "recipe.resolved.yaml").read_text())
                for step in (sweep_dir / "steps").iterdir()]
    assert len(launched) >= 2
    assert {r["model"]["path"] for r in launched} == {str(project / "models" / "m-w4a16")}
    assert {r["model"]["quantization"] for r in launched} == {"compressed-tensors"}
    values = sorted(r["engine"]["max_num_seqs"] for r in launched)
    assert values[0] == 1 and values[-1] <= 4

    written = load_recipe(project / "r.yaml").resolved
    assert written["engine"]["max_num_seqs"] == swept["chosen"]
    assert written["model"]["path"] == "models/m-w4a16"
    assert written["model"]["pins"]["sha256"] == \
        checkpoint_hash(project / "models" / "m-w4a16").sha256
    assert written["validated"]["by"] == "optimize"
    # the revision's figures are the sweep's (measured on the mock), not the scripted 12.0
    assert written["validated"]["metrics"]["qps"] == swept["figures"]["qps"] != 12.0
    report = (outcome.archive / "report.md").read_text()
    assert "sweep" in report and str(swept["chosen"]) in report
    assert verify_archive(outcome.archive) == []
