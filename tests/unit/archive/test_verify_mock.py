"""`mopt verify` end to end on the command line, served by the mock engine
(``tests/unit/mock_mopt.py``: real servers, HTTP and archives, no vLLM).

One module-scoped history: run A of a scratch recipe (max_num_seqs 4, 4 in flight), rolled
back to as revision 2 (validated by A, pinned). Then: verify holds (exit 0), verify of a
slower server (max_num_seqs 1) regresses (exit 4) naming the figure and its interval,
`--json`, the archived verdict in `status` and `runs show`, a faked vLLM version in the
validated block (drift: `status` proposes verify, `apply --strict` refuses until a
verification here holds), `--url`, `rollback --apply`, and `--retune`.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from model_optimizer.archive.manifest import verify_archive
from model_optimizer.recipe import load_recipe
from tests.unit.mock_mopt import ROOT
from tests.unit.mock_mopt import invoke_mock_mopt as run_mopt

pytestmark = pytest.mark.slow  # several seconds a test: mock servers launched

TINY_RECIPE = ROOT / "recipes" / "tiny-cpu.yaml"
RUN_A = ["--set", "engine.max_num_seqs=4", "--set", "workload.num_requests=48",
         "--set", "workload.duration_s=null", "--set", "workload.output_tokens=8",
         "--set", "workload.concurrency=4", "--set", "workload.warmup_steady_max_s=null"]
SWEEP = {"start": 2, "growth": 2, "max": 4, "resolution": 2, "confirm_duration_s": 0,
         "remeasure_rounds": 0}
SLOW = {"ttft_ms": 100, "itl_ms": 10, "capacity": 1}  # a quarter of run A's throughput


def ok(result):
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture(scope="module")
def validated(tiny_model_dir, tmp_path_factory) -> SimpleNamespace:
    """Revision 2 of a scratch recipe, validated by run A (a rollback to it)."""
    base = tmp_path_factory.mktemp("verify")
    recipe = base / "tiny-cpu.yaml"
    document = TINY_RECIPE.read_text().replace("../models/tiny-llama", str(tiny_model_dir))
    recipe.write_text(document)
    runs = base / "runs"
    first = json.loads(ok(run_mopt("apply", str(recipe), "--runs-dir", str(runs), *RUN_A,
                                   "--json")).stdout)
    ok(run_mopt("rollback", first["run_id"], "--runs-dir", str(runs)))
    assert load_recipe(recipe).resolved["validated"]["run_id"] == first["run_id"]
    return SimpleNamespace(recipe=recipe, runs=runs, first=Path(first["archive"]))


def verify(h, *args):
    return run_mopt("verify", str(h.recipe), "--runs-dir", str(h.runs), *args)


def test_a_freshly_validated_recipe_holds(validated):
    result = ok(verify(validated, "--json"))
    data = json.loads(result.stdout)
    assert data["verdict"] == "holds" and data["holds"] and data["exit_code"] == 0
    judged = {c["metric"]: c for c in data["checks"] if c["verdict"] != "not judged"}
    assert {"qps", "ttft_p50_ms", "e2e_p50_ms"} <= set(judged)
    assert all(c["validated_half_width"] is not None for c in judged.values())
    # measured with the validating run's workload, as a step of the verify archive
    run = Path(data["run"]["archive"])
    assert json.loads((run / "run.json").read_text())["workload"] == json.loads(
        (validated.first / "run.json").read_text())["workload"]
    archive = Path(data["archive"])
    assert run.parent == archive / "steps" and verify_archive(archive) == []
    status = json.loads((archive / "status.json").read_text())
    assert status["kind"] == "verify" and status["status"] == "ok"
    assert json.loads((archive / "verdict.json").read_text())["verdict"] == "holds"


def test_a_slower_server_regresses_with_the_figure_and_its_interval(validated):
    result = verify(validated, "--set", "engine.max_num_seqs=1")
    assert result.returncode == 4, result.stdout + result.stderr
    verdict = next(line for line in result.stdout.splitlines()
                   if line.startswith("REGRESSED"))
    assert "qps: " in verdict and " ± " in verdict and "noise" in verdict
    assert "next: mopt sweep " in result.stdout
    data = json.loads(verify(validated, "--set", "engine.max_num_seqs=1", "--json").stdout)
    assert data["verdict"] == "regressed" and "qps" in data["regressed"]
    qps = next(c for c in data["checks"] if c["metric"] == "qps")
    assert qps["worse_by"] > qps["noise"] > 0
    assert data["next"][0]["command"].startswith("mopt sweep ")
    status = json.loads((Path(data["archive"]) / "status.json").read_text())
    assert status["status"] == "failed:regressed"


def test_status_and_runs_show_the_verdict(validated):
    data = json.loads(ok(verify(validated, "--json")).stdout)
    report = json.loads(ok(run_mopt("status", "--runs-dir", str(validated.runs),
                                    "--json")).stdout)
    assert report["verification"]["id"] == Path(data["archive"]).name
    assert report["verification"]["here"] and report["verification"]["verdict"] == "holds"
    shown = ok(run_mopt("runs", "show", Path(data["archive"]).name, "--runs-dir",
                        str(validated.runs))).stdout
    assert "verified on vLLM" in shown and ": holds" in shown


def test_a_new_vllm_version_is_verified_before_strict_accepts_it(validated, tmp_path):
    """A faked version change in the validated block: apply --strict refuses until a
    verification of this configuration here holds, then accepts; status shows it."""
    recipe = tmp_path / "tiny-cpu.yaml"
    document = yaml.safe_load(validated.recipe.read_text())
    text = validated.recipe.read_text().replace(
        f"vllm_version: {document['validated']['vllm_version']}", "vllm_version: 0.0.1")
    # another configuration than the module's recipe (whose verifications held here)
    text = text.replace("ttft_p99_ms: 5000", "ttft_p99_ms: 5001")
    assert "vllm_version: 0.0.1" in text and "ttft_p99_ms: 5001" in text
    recipe.write_text(text)
    h = SimpleNamespace(recipe=recipe, runs=validated.runs)
    refused = run_mopt("apply", str(recipe), "--runs-dir", str(h.runs), "--strict")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "run `mopt verify`" in refused.stdout + refused.stderr
    held = ok(verify(h))
    assert "vLLM 0.0.1" in held.stderr  # the drift it verified
    accepted = run_mopt("apply", str(recipe), "--runs-dir", str(h.runs), "--strict",
                        "--json")
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert "so --strict accepts it" in accepted.stderr
    report = json.loads(ok(run_mopt("status", "--runs-dir", str(h.runs), "--json")).stdout)
    assert Path(report["current"]["path"]).resolve() == recipe.resolve()
    assert report["verification"]["here"] and report["verification"]["verdict"] == "holds"
    assert report["next"][0]["command"] == "mopt apply --strict"


def test_url_measures_the_running_server(validated):
    from model_optimizer.load.mock_server import MockServer

    served = load_recipe(validated.recipe).resolved["model"]["served_name"]
    with MockServer(model=served, ttft_s=0.05, itl_s=0.005, max_num_seqs=1) as server:
        result = verify(validated, "--url", server.url, "--json")
    assert result.returncode == 4, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["environment"] == {"vllm": None, "hardware": None, "driver": None,
                                   "checkpoint": None}
    run = json.loads((Path(data["run"]["archive"]) / "run.json").read_text())
    assert run["kind"] == "bench" and run["url"] == server.url
    assert "qps" in data["regressed"]


def test_rollback_apply_is_judged_by_the_same_rule(validated, tmp_path):
    copy = tmp_path / "copy.yaml"
    copy.write_text(validated.recipe.read_text())
    result = run_mopt("rollback", validated.first.name, "--recipe", str(copy),
                      "--runs-dir", str(validated.runs), "--apply", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert data["verification"]["verdict"] == "holds"
    assert data["verification"]["rule"] == json.loads(
        ok(verify(validated, "--json")).stdout)["rule"]
    slow = run_mopt("rollback", validated.first.name, "--recipe", str(copy), "--runs-dir",
                    str(validated.runs), "--apply", "--json",
                    engine=SLOW)
    assert slow.returncode == 4, slow.stdout + slow.stderr
    assert json.loads(slow.stdout)["verification"]["verdict"] == "regressed"


def test_retune_runs_the_sweep_after_a_regression(validated, tmp_path):
    recipe = tmp_path / "retune.yaml"
    text = validated.recipe.read_text()
    head, tail = text.split("\nsweep:\n", 1)
    small = yaml.safe_dump({"sweep": {"param": "max_num_seqs", **SWEEP}}, sort_keys=False)
    recipe.write_text(head + "\n" + small + "tune:\n" + tail.split("\ntune:\n", 1)[1])
    recipe.write_text(recipe.read_text().replace("num_requests: 48", "num_requests: 16"))
    assert load_recipe(recipe).resolved["sweep"]["max"] == 4
    result = run_mopt("verify", str(recipe), "--runs-dir", str(validated.runs), "--retune",
                      engine=SLOW)
    assert "REGRESSED" in result.stdout and "--retune: mopt sweep" in result.stdout, \
        result.stdout + result.stderr
    assert result.returncode == 0, result.stdout + result.stderr  # the sweep's: written
    written = load_recipe(recipe).resolved
    assert written["validated"]["by"] == "sweep" and written["revision"] == 3
