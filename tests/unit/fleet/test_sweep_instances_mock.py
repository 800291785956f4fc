"""`mopt split FLEET --sweep-instances` for real on the mock engine: each instance's sweep
(real launches, real loads of its own classes, on its own core) archived under the
experiment, each instance's revision beside it, and the fleet's next revision written with
the chosen values and the sweeps' evidence; no process left."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

import model_optimizer.engine.factory as factory
from model_optimizer.cli.main import app
from model_optimizer.engine.factory import MockEngine
from model_optimizer.fleet import load_fleet
from model_optimizer.fleet.rules import SWEEP_EVIDENCE
from tests.unit.mock_engine import alive, children_pids

from .conftest import cpu_fleet

pytestmark = pytest.mark.slow  # whole sweeps: launches, warm-ups, loads

SWEEP = {"param": "max_num_seqs", "start": 1, "max": 4, "plateau_threshold": 0.2,
         "max_launches": 3, "confirm_duration_s": 0, "strategy": "relaunch", "budget": None}


def member(model_dir, served: str) -> dict:
    """A member recipe served by the mock: a quick sweep section of its own."""
    return {"recipe_version": 1, "name": served,
            "model": {"path": str(model_dir), "served_name": served},
            "engine": {"block_size": 32, "max_model_len": 2048, "max_num_seqs": 2,
                       "enforce_eager": True},
            "sweep": dict(SWEEP)}


def test_each_instance_is_swept_on_the_mock_and_the_fleet_revised(tmp_path, tiny_model_dir,
                                                                  monkeypatch):
    for name in ("short", "long"):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(member(tiny_model_dir,
                                                                     f"m-{name}")))
    doc = cpu_fleet()
    doc["instances"] = {
        "short": {"recipe": "short.yaml", "kv_cache_gib": 1, "cores": [0]},
        "long": {"recipe": "long.yaml", "set": ["engine.max_num_seqs=2"], "kv_cache_gib": 1,
                 "cores": [1]}}
    doc["workload"]["mix"]["long"]["prompt_tokens"] = {"dist": "uniform", "min": 100,
                                                       "max": 200}
    doc["workload"].update(num_requests=8, warmup_requests=1)
    members = [(tmp_path / f"{n}.yaml").read_text() for n in ("short", "long")]
    fleet_file = tmp_path / "fleet.yaml"
    fleet_file.write_text("# swept on the mock\n" + yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.setattr(factory, "VllmEngine", lambda: MockEngine(ttft_ms=20, itl_ms=2,
                                                                  capacity=4))
    before = children_pids()
    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, ["split", str(fleet_file), "--sweep-instances",
                                      "--runs-dir", str(runs)], env={"COLUMNS": "200"})
    assert not alive(children_pids() - before)  # every mock engine stopped
    assert result.exit_code == 0, result.output
    archive = next(runs.glob("*f-sweep*"))
    summary = json.loads((archive / "sweeps.json").read_text())
    fleet = load_fleet(fleet_file)
    assert fleet.resolved["revision"] == 2
    evidence = fleet.resolved[SWEEP_EVIDENCE]
    assert evidence["run_id"] == archive.name
    for item in summary["sweeps"]:
        name = item["instance"]
        swept = archive / "steps" / item["run_id"]
        state = json.loads((swept / "status.json").read_text())
        assert (state["kind"], state["status"]) == ("sweep", "ok")
        # each step served what the fleet serves: its core, its share, its classes only
        step = next(p for p in (swept / "steps").iterdir() if p.is_dir())
        resolved = yaml.safe_load((step / "recipe.resolved.yaml").read_text())
        assert resolved["hardware"]["placement"] == {"engine": list(
            fleet.instances[name].cores)}
        assert list(resolved["workload"]["mix"]) == [name]
        assert resolved["engine"]["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"
        revision = yaml.safe_load((archive / f"instance.{name}.yaml").read_text())
        value = revision["engine"]["max_num_seqs"]
        assert fleet.instances[name].recipe.spec.engine.max_num_seqs == value
        assert evidence["instances"][name]["value"] == value == item["value"]
        assert evidence["instances"][name]["resolved"] is revision["validated"]["resolved"]
        assert evidence["instances"][name]["run_id"] == item["run_id"]
        assert evidence["instances"][name]["figures"]["qps"] > 0
    text = fleet_file.read_text()
    assert text.startswith("# swept on the mock\n")
    assert yaml.safe_load(text)["instances"]["long"]["set"] == [
        f"engine.max_num_seqs={evidence['instances']['long']['value']}"]
    assert [(tmp_path / f"{n}.yaml").read_text() for n in ("short", "long")] == members
    assert json.loads((archive / "status.json").read_text())["status"] == "ok"
    assert f"wrote revision 2 of the fleet to {fleet_file}" in result.output
