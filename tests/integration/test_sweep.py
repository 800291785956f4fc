"""`mopt sweep` on the real vLLM CPU server: the memory ceiling that vLLM's KV cache sets.

The plateau, Ctrl-C and --resume are orchestration: tests/unit/search/sweep/test_sweep_cli_mock.py
runs them on the mock engine; probe-scan's real launch is test_probe_scan.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from model_optimizer.recipe import load_recipe

from .conftest import run_mopt

#: quiet: the verification compares two real runs taken minutes apart; beside the parallel
#: tier's other engines (CI: load average 4.5 on 2 cores) TTFT read 78 ms at validation and
#: 344 ms at verification, which is the neighbours' work, not a regression
pytestmark = [pytest.mark.integration, pytest.mark.quiet]



def sweep_dir(runs: Path) -> Path:
    [folder] = [p for p in runs.iterdir() if p.is_dir()]
    return folder


def step_runs(folder: Path) -> list[dict]:
    """run.json of every step archive (measurements and confirmations)."""
    return [json.loads((p / "run.json").read_text()) | {
        "status": json.loads((p / "status.json").read_text())["status"]}
        for p in sorted((folder / "steps").iterdir())]


def test_sweep_stops_at_the_memory_ceiling(recipe_copy, tmp_path):
    runs = tmp_path / "runs"
    # a 2 MiB KV cache: 1024 tokens, 10 sequences of 64 + 32 tokens without preemption;
    # starting at the ceiling spends one launch: every value above it is refused unlaunched
    # (starting at 8 spent two where four showed the same; at 2, four)
    result = run_mopt(
        "sweep", str(recipe_copy), "--param", "max_num_seqs", "--start", "10", "--max", "64",
        "--runs-dir", str(runs), "--json",
        "--set", "engine.extra_args={kv-cache-memory-bytes: 2097152}",
        "--set", "sweep.confirm_duration_s=0", "--set", "workload.num_requests=60",
        "--set", "sweep.remeasure_rounds=0", "--strategy", "relaunch",
        "--set", "workload.warmup_steady_max_s=null", timeout=1200)
    assert result.returncode == 0, result.stdout + result.stderr
    folder = sweep_dir(runs)
    summary = json.loads((folder / "summary.json").read_text())
    rows = {row["value"]: row for row in summary["steps"]}
    skipped = sorted(v for v, row in rows.items() if row["status"] == "skipped")
    assert skipped and min(skipped) > 10, summary  # the planner refused what cannot fit
    assert rows[10]["status"] == "ok"
    assert summary["ceiling"] == min(skipped)
    chosen = json.loads(result.stdout)["chosen"]["value"]
    assert chosen == 10
    assert load_recipe(recipe_copy).resolved["engine"]["max_num_seqs"] == chosen
    launched = [r for r in step_runs(folder)]
    assert all(r["value"] <= 10 for r in launched)  # no launch spent on a certain failure


    # issue 39: `mopt verify` of the revision the sweep just validated holds; the same
    # recipe on a slower server (one sequence at a time under the same 10 in flight)
    # regresses, naming the figure and its interval (two launches)
    held = run_mopt("verify", str(recipe_copy), "--runs-dir", str(runs), "--json")
    data = json.loads(held.stdout)
    if data["client_bound"]:  # the tiny bed's client often sets the pace: not judged
        assert held.returncode == 2, held.stdout + held.stderr
        assert data["verdict"].startswith("not judged: client-bound") and not data["holds"]
    else:
        assert held.returncode == 0, held.stdout + held.stderr
        assert data["verdict"] == "holds"
    assert data["validation"]["run_id"] == folder.name
    run = json.loads((Path(data["run"]["archive"]) / "run.json").read_text())
    assert run["workload"]["concurrency"] == 10  # the validating run's workload
    slow = run_mopt("verify", str(recipe_copy), "--runs-dir", str(runs), "--json",
                    "--set", "engine.max_num_seqs=1")
    assert slow.returncode == 4, slow.stdout + slow.stderr
    regressed = json.loads(slow.stdout)
    # TTFT under 10 in flight and one slot is some 30x the validated one; throughput's
    # drop (about 85%) can be within a 60-request window's wide interval
    assert "ttft_p50_ms" in regressed["regressed"], regressed["checks"]
    for check in regressed["checks"]:
        if check["metric"] in regressed["regressed"]:
            assert check["worse_by"] > check["noise"] > 0
            assert check["measured_half_width"] is not None

    # issue 39: a faked vLLM version in the validated block (in another configuration than
    # the one just verified, so no verification here covers it) takes the re-verification
    # path on the real install: `status` proposes `mopt verify`, `apply --strict` refuses
    # before launching anything
    version = load_recipe(recipe_copy).resolved["validated"]["vllm_version"]
    faked = recipe_copy.read_text().replace(f"vllm_version: {version}", "vllm_version: 0.0.1")
    faked = faked.replace("ttft_p99_ms: 5000", "ttft_p99_ms: 5001")
    assert "vllm_version: 0.0.1" in faked and "ttft_p99_ms: 5001" in faked
    recipe_copy.write_text(faked)
    status = run_mopt("status", "--runs-dir", str(runs), "--json")
    assert status.returncode == 0, status.stdout + status.stderr
    report = json.loads(status.stdout)
    assert Path(report["current"]["path"]).resolve() == recipe_copy.resolve(), report
    assert report["next"][0]["command"] == "mopt verify", report["next"]
    refused = run_mopt("apply", str(recipe_copy), "--runs-dir", str(runs), "--strict")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "run `mopt verify`" in refused.stdout + refused.stderr
