"""The design card's workflow on the command line, served by the mock engine (the current
recipe and the preflight are mopt's own, not vLLM's): `mopt apply FILE`, then
`mopt sweep --param max_num_seqs --start 8` with no recipe sweeps FILE and writes its next
revision, and `mopt status` shows that revision with its figures."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from model_optimizer.recipe import load_recipe
from tests.unit.mock_mopt import ROOT
from tests.unit.mock_mopt import invoke_mock_mopt as run_mopt

TINY_RECIPE = ROOT / "recipes" / "tiny-cpu.yaml"
SHORT = ["--set", "workload.num_requests=48", "--set", "workload.warmup_requests=2",
         "--set", "workload.duration_s=null", "--set", "workload.output_tokens=8",
         "--set", "workload.warmup_steady_max_s=null"]


@pytest.fixture
def recipe_copy(tmp_path, tiny_model_dir) -> Path:
    path = tmp_path / "my-tiny.yaml"
    path.write_text(TINY_RECIPE.read_text().replace("../models/tiny-llama",
                                                    str(tiny_model_dir)))
    return path


@pytest.mark.slow  # several seconds: real processes (quick tier: not slow)
def test_apply_then_sweep_without_a_recipe_then_status(recipe_copy, tmp_path):
    runs = str(tmp_path / "runs")
    applied = run_mopt("apply", str(recipe_copy), "--runs-dir", runs, *SHORT)
    assert applied.returncode == 0, applied.stdout + applied.stderr

    with socket.socket() as taken:  # preflight: refused before any launch, nothing archived
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        refused = run_mopt("sweep", "--param", "max_num_seqs", "--start", "8", "--runs-dir",
                           runs, "--set", f"engine.port={port}")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"engine.port: port {port} on 127.0.0.1 is taken" in refused.stderr
    assert len([p for p in Path(runs).iterdir() if p.is_dir()]) == 1  # the apply's only

    swept = run_mopt("sweep", "--param", "max_num_seqs", "--start", "8", "--max", "8",
                     "--runs-dir", runs, "--set", "sweep.max_launches=1",
                     "--set", "sweep.confirm_duration_s=0", *SHORT)
    assert swept.returncode == 0, swept.stdout + swept.stderr
    assert f"using {recipe_copy} (revision 1, last used" in swept.stdout
    assert "by apply)" in swept.stdout
    written = load_recipe(recipe_copy).resolved
    assert written["revision"] == 2
    assert written["validated"]["by"] == "sweep"
    assert written["engine"]["max_num_seqs"] == 8

    status = run_mopt("status", "--runs-dir", runs, "--json")
    assert status.returncode == 0, status.stdout + status.stderr
    report = json.loads(status.stdout)
    assert Path(report["current"]["path"]).resolve() == recipe_copy.resolve()
    assert report["current"]["by"] == "sweep" and report["recipe"]["revision"] == 2
    figures = report["recipe"]["validated"]["metrics"]
    assert figures["qps"] > 0 and figures == written["validated"]["metrics"]
    assert report["drift"] == [] and report["preflight"]["refusals"] == []
    assert [row["kind"] for row in report["recent"]] == ["sweep", "run"]
    text = run_mopt("status", "--runs-dir", runs)
    assert "revision 2)" in text.stdout and f"{figures['qps']:.2f} req/s" in text.stdout
