"""`mopt tune` scanning max_num_seqs on the real vLLM CPU server (tiny model, short windows):
a space of max_num_seqs x one more knob; each trial launches the other knob's value once and
measures every max_num_seqs level on that server; the best is confirmed by a launch of its
own and written as the next revision."""

from __future__ import annotations

import json

import optuna
import pytest

from model_optimizer.recipe import load_recipe
from model_optimizer.search.tune.study import budget_used, sqlite_url

from .conftest import TINY_RECIPE, read_jsonl, run_mopt

# slow: not in the quick real-engine tier. Its assertions hold whatever the speed (the rules
# applied to the windows it measured; a bound with a wide margin), so it runs beside another test
pytestmark = [pytest.mark.integration, pytest.mark.slow]
SPACE = ("--set", "tune.params={max_num_seqs: {type: categorical, choices: [1, 4]}, "
         "enable_prefix_caching: {type: categorical, choices: [false, true]}}",
         "--set", "tune.sampler=grid", "--set", "tune.n_trials=2",
         "--set", "workload.num_requests=16", "--set", "workload.duration_s=null",
         "--set", "workload.warmup_requests=2", "--set", "workload.warmup_steady_max_s=null")


def steps(archive) -> dict[str, list[tuple]]:
    """(step folder, run.json) of every step, by kind (server, bench, run)."""
    kinds: dict[str, list[tuple]] = {}
    for step in sorted((archive / "steps").iterdir()):
        data = json.loads((step / "run.json").read_text())
        kinds.setdefault(data.get("kind", "run"), []).append((step, data))
    return kinds


def test_each_trial_scans_max_num_seqs_on_one_launch(tiny_model, tmp_path):
    runs, output = tmp_path / "runs", tmp_path / "tuned.yaml"
    result = run_mopt("tune", str(TINY_RECIPE), *SPACE, "--scan", "--runs-dir", str(runs),
                      "--output", str(output), "--json", timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout)
    archive = runs / summary["archive"].rsplit("/", 1)[-1]
    kinds = steps(archive)
    servers = kinds["server"]  # one launch per value of enable_prefix_caching, at 4
    assert sorted(d["params"]["enable_prefix_caching"] for _, d in servers) == [False, True]
    assert all(d["params"]["max_num_seqs"] == 4 and (s / "engine.log").is_file()
               for s, d in servers)
    windows = kinds["bench"]  # levels 1 and 4 on each server, with their own requests
    assert sorted(d["level"] for _, d in windows) == [1, 1, 4, 4]
    server_runs = {s.name for s, _ in servers}
    assert all(d["server_run"] in server_runs for _, d in windows)
    assert all(read_jsonl(s / "requests.jsonl") for s, _ in windows)
    study = optuna.load_study(study_name=archive.name, storage=sqlite_url(archive /
                                                                          "study.db"))
    trials = study.get_trials()
    assert len(trials) == 4 and budget_used(trials) == 2  # two launches, four trials
    tune_summary = json.loads((archive / "summary.json").read_text())
    assert tune_summary["launches"] == 2 and tune_summary["windows"] == 4
    best = next(t for t in trials if t.number == tune_summary["best"])
    # the written configuration's own launch (a runner-up confirmed side by side and beaten
    # comes after it: CI, 2026-12-03, read the runner-up's figure here)
    [confirm] = [c for c in tune_summary["confirmations"] if c["params"] == best.params]
    assert confirm["ok"] and (archive / "steps" / confirm["run_id"] / "engine.log").is_file()
    written = load_recipe(output).resolved
    assert written["engine"]["max_num_seqs"] == best.params["max_num_seqs"]
    assert written["engine"]["enable_prefix_caching"] == best.params["enable_prefix_caching"]
    assert written["validated"]["by"] == "tune"
    assert written["validated"]["metrics"]["qps"] == confirm["figures"]["qps"]
    assert "level scanned on launch" in (archive / "report.md").read_text()
