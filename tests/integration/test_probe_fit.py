"""Probe-fit on the real vLLM CPU server: one scan server scanned up and down, the knee from
the fitted curve with its verdict in the revision, one confirming launch."""

from __future__ import annotations

import json

import pytest
import yaml

from model_optimizer.search.sweep.fitscan import PHASE_DOWN, PHASE_UP, coarse_levels
from model_optimizer.search.sweep.model import Point

from .conftest import run_mopt

# slow: not in the quick real-engine tier. Its assertions hold whatever the speed (the rules
# applied to the windows it measured; a bound with a wide margin), so it runs beside another test
pytestmark = [pytest.mark.integration, pytest.mark.slow]



def test_probe_fit_scans_up_and_down_and_writes_the_fitted_knee(recipe_copy, tmp_path):
    runs = tmp_path / "runs"
    result = run_mopt(
        "sweep", str(recipe_copy), "--param", "max_num_seqs", "--start", "1", "--max", "4",
        "--strategy", "probe-fit", "--runs-dir", str(runs), "--json",
        "--set", "workload.duration_s=3", "--set", "sweep.confirm_duration_s=3",
        "--set", "sweep.remeasure_rounds=0", "--set", "workload.warmup_steady_max_s=null",
        timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    [folder] = [p for p in runs.iterdir() if p.is_dir()]
    summary = json.loads((folder / "summary.json").read_text())
    state = json.loads((folder / "state.json").read_text())
    assert summary["strategy"] == "probe-fit" and summary["launches"] == 2
    points = [Point.from_dict(p) for p in state["history"]]
    levels = coarse_levels(1, 4)
    up = [p for p in points if p.phase == PHASE_UP]
    assert [p.value for p in up] == levels
    # the down pass re-measures the usable range from its top: every level below the first
    # one the up pass found unacceptable (an SLO missed on a loaded machine ends it early)
    bad = [p.value for p in up if not p.acceptable]
    usable = [v for v in levels if not bad or v < min(bad)]
    assert usable and [p.value for p in points if p.phase == PHASE_DOWN] == usable[::-1]
    # every window carries its TTFT p99 over the recipe's 5000 ms bound: the knee's SLO is
    # judged on all of them (search/core/slocheck.py), its upper bound in the revision
    assert all(len(p.slo_ratios) == 1 and p.slo_ratios[0] > 0 for p in points
               if p.status == "ok")
    knee = yaml.safe_load(recipe_copy.read_text())["validated"]["knee"]
    assert isinstance(knee["resolved"], bool) and 1 <= knee["value"] <= 4
    assert not knee["resolved"] or 0 < knee["slo_bound"] < 1
    assert knee["band"][0] <= knee["band"][1] and knee["windows"] >= len(levels) + len(usable)
    assert yaml.safe_load(recipe_copy.read_text())["engine"]["max_num_seqs"] == knee["value"]
    report = (folder / "report.md").read_text()
    assert "fitted knee" in report and "resolved" in report
