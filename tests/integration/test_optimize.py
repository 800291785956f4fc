"""`mopt optimize` end to end on the real vLLM CPU server, llm-compressor and the tiny model.

Baseline, one quantized candidate (W8A8, served on CPU), the quality gate (when the recipe
has a quality section), a short max_num_seqs sweep on the survivor, and the validated
revision whose pins match the checkpoint on disk; then a changed weight file is reported by
`mopt apply` (refused with --strict).
"""

from __future__ import annotations

import csv
import json
import os

import pytest
import yaml

from model_optimizer.archive.manifest import verify_archive
from model_optimizer.models.pins import checkpoint_hash

from .conftest import ROOT, TINY_RECIPE, run_mopt
from .test_quantize import require_quant_env

pytestmark = pytest.mark.integration


def test_optimize_tiny_model_end_to_end(tiny_model, tmp_path):
    require_quant_env()
    recipe = yaml.safe_load(TINY_RECIPE.read_text())
    recipe["model"]["path"] = str(tiny_model)
    recipe["workload"].update(num_requests=24, warmup_requests=2)
    recipe["slo"] = {"min_success_rate": 1.0}
    recipe["sweep"] = {"param": "max_num_seqs", "start": 2, "max": 4, "max_launches": 2,
                       "confirm_duration_s": 3}
    recipe["quantize"] = {"output": "tiny-w8a8",
                          "calibration": {"num_samples": 16, "max_seq_length": 64}}
    # the gate: the candidate's answers against the baseline's on the shipped eval set
    recipe["quality"] = {"eval_set": str(ROOT / "examples" / "quality" / "tiny-tasks.jsonl"),
                         "max_tokens": 8, "thresholds": {"min_top1_agreement": 0.5}}
    recipe["optimize"] = {"survivor": "best_candidate",
                          "candidates": [{"name": "w8a8", "quantize": {"scheme": "w8a8"}}]}
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    runs = tmp_path / "runs"

    done = run_mopt("optimize", str(path), "--runs-dir", str(runs), "--json", timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    outcome = json.loads(done.stdout)
    assert outcome["survivor"] == "w8a8"
    archive = runs / outcome["pipeline_id"]
    assert verify_archive(archive) == []
    state = json.loads((archive / "state.json").read_text())
    assert list(state["stages"]) == ["baseline", "w8a8", "sweep"]
    for stage in state["stages"].values():
        assert stage["status"] == "ok", stage
    steps = {p.name for p in (archive / "steps").iterdir()}
    assert set(state["stages"]["baseline"]["run_ids"]) <= steps
    assert state["stages"]["w8a8"]["checkpoint"]["archive"] in steps
    assert os.path.basename(state["stages"]["sweep"]["sweep_dir"]) in steps
    reference, gate = state["stages"]["baseline"]["gate"], state["stages"]["w8a8"]["gate"]
    assert reference["gated"] and reference["baseline"] and reference["run_id"] in steps
    assert gate["gated"] and gate["passed"] and gate["run_id"] in steps
    assert 0.5 <= gate["figures"]["top1_agreement"] <= 1.0
    assert gate["figures"]["mean_kl"] >= 0.0

    checkpoint = tmp_path / "tiny-w8a8"
    written = yaml.safe_load(path.read_text())
    assert written["revision"] == 2 and written["validated"]["by"] == "optimize"
    assert written["model"]["pins"]["sha256"] == checkpoint_hash(checkpoint).sha256
    assert written["model"]["quantization"] == "compressed-tensors"
    assert written["engine"]["max_num_seqs"] == state["stages"]["sweep"]["chosen"]
    rows = list(csv.DictReader((archive / "summary.csv").open()))
    assert [r["stage"] for r in rows] == ["baseline", "w8a8", "sweep"]
    assert all(float(r["qps"]) > 0 for r in rows)
    assert (archive / "plot.png").stat().st_size > 1000
    assert "| **w8a8** (survivor) |" in (archive / "report.md").read_text()

    weights = checkpoint / "model.safetensors"
    with weights.open("r+b") as handle:
        handle.seek(-16, os.SEEK_END)
        byte = handle.read(1)
        handle.seek(-16, os.SEEK_END)
        handle.write(bytes([byte[0] ^ 0xFF]))
    refused = run_mopt("apply", str(path), "--runs-dir", str(runs), "--strict")
    assert refused.returncode == 2
    assert "model.safetensors changed" in refused.stderr + refused.stdout
