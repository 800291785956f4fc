"""`mopt apply` as a process of its own on the mock engine: Ctrl-C during the load exits 130,
archives the run interrupted with the figures measured so far, and writes its report.

What only vLLM can show (its whole process group gone after SIGHUP, SIGKILL and a dying
engine, no secret in the archive) is tests/integration/test_signals.py, test_apply.py and
test_kill_orphans.py.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.unit.mock_mopt import ROOT, start_mock_mopt

TINY_RECIPE = ROOT / "recipes" / "tiny-cpu.yaml"


def _measured(runs: Path, count: int, proc, log: Path, timeout: float = 120) -> Path:
    """The run archive once ``count`` measured requests are in its request log."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()
        for requests in runs.glob("*/requests.jsonl"):
            lines = [json.loads(line) for line in requests.read_text().splitlines()[:-1]]
            if sum(not r["warmup"] for r in lines) >= count:
                return requests.parent
        time.sleep(0.1)
    raise AssertionError(f"the load did not start in time:\n{log.read_text()}")


@pytest.mark.slow  # several seconds: real processes (quick tier: not slow)
def test_ctrl_c_during_apply_exits_130_and_archives_interrupted(tiny_model_dir, tmp_path):
    runs, log = tmp_path / "runs", tmp_path / "mopt.log"
    proc = start_mock_mopt("apply", str(TINY_RECIPE), "--runs-dir", str(runs),
                           "--set", "workload.num_requests=100000",
                           "--set", "workload.duration_s=300",
                           # Ctrl-C lands in the measured load either way; the steady warm-up
                           # before it (at least 9 s of 3 s rounds) is not this test's subject
                           "--set", "workload.warmup_steady_max_s=null", log=log)
    try:
        archive = _measured(runs, 5, proc, log)
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(60) == 130, log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    status = json.loads((archive / "status.json").read_text())
    assert status["status"] == "interrupted"
    metrics = json.loads((archive / "metrics.json").read_text())
    assert metrics["completed"] >= 5 and metrics["qps"] > 0
    assert (archive / "report.md").is_file()
