"""measure.measure_configuration on the mock engine: planner skips without a launch, repeats,
the first failure ends the repeats, figures; and the recipe variants a search measures.
"""

from __future__ import annotations

import json

from model_optimizer.engine.factory import MockEngine
from model_optimizer.search.measure import (
    FIGURE_KEYS,
    measure_configuration,
    planner_verdict,
    step_figures,
)
from tests.unit.mock_engine import mock_recipe

KV_SMALL = ("ValueError: To serve at least one request with the model's max seq len (4096), "
            "(0.50 GiB KV cache is needed, which is larger than the available KV cache memory "
            "(0.10 GiB)")


def model_config(model_dir):
    return json.loads((model_dir / "config.json").read_text())


def run_folders(runs):
    return sorted(p for p in runs.iterdir() if p.is_dir()) if runs.exists() else []


def test_repeats_are_archived_runs_and_samples_of_the_objective(tmp_path, tiny_model_dir):
    step = mock_recipe(tmp_path, tiny_model_dir).varied({"engine.max_num_seqs": 2}, "test")
    assert step.resolved["engine"]["max_num_seqs"] == 2 and step.path is not None
    events = []
    result = measure_configuration(step, tmp_path / "runs", repeats=2, objective="qps",
                                   model_config=model_config(tiny_model_dir),
                                   on_event=lambda event: events.append(event.kind),
                                   archive_extra={"step": 7},
                                   engine_factory=MockEngine(ttft_ms=2))
    assert result.status == "ok" and result.slo_met is True
    assert len(result.samples) == 2 and all(s > 0 for s in result.samples)
    folders = run_folders(tmp_path / "runs")
    assert [f.name for f in folders] == sorted(result.run_ids) and len(folders) == 2
    repeats = sorted(json.loads((f / "run.json").read_text())["repeat"] for f in folders)
    assert repeats == [0, 1]
    assert json.loads((folders[0] / "run.json").read_text())["step"] == 7
    assert set(FIGURE_KEYS) <= set(result.figures) and result.figures["status"] == "ok"
    assert result.figures["run_id"] == result.run_ids[-1]
    assert events.count("done") == 2


def test_the_planner_skips_a_configuration_without_a_launch(tmp_path, tiny_model_dir):
    step = mock_recipe(tmp_path, tiny_model_dir).varied(
        {"engine.max_num_seqs": 16384, "workload.prompt_tokens": 1000}, "test")
    verdict = planner_verdict(step, model_config(tiny_model_dir))
    assert verdict and "max_num_seqs=16384" in verdict
    result = measure_configuration(step, tmp_path / "runs", repeats=3, objective="qps",
                                   model_config=model_config(tiny_model_dir),
                                   engine_factory=MockEngine())
    assert (result.status, result.failure_kind, result.reason) == ("skipped", "planner", verdict)
    assert result.run_ids == [] and run_folders(tmp_path / "runs") == []
    assert planner_verdict(step, None) is None  # no model config: no opinion


def test_a_failed_launch_ends_the_repeats(tmp_path, tiny_model_dir):
    step = mock_recipe(tmp_path, tiny_model_dir)
    result = measure_configuration(step, tmp_path / "runs", repeats=3, objective="qps",
                                   engine_factory=MockEngine(fail_start=KV_SMALL))
    assert result.status == "failed" and result.failure_kind == "kv_cache_too_small"
    assert len(result.run_ids) == 1 and result.samples == [] and result.slo_met is None
    assert result.figures["failure"] == "kv_cache_too_small"


def test_a_missed_slo_is_measured_not_failed(tmp_path, tiny_model_dir):
    step = mock_recipe(tmp_path, tiny_model_dir, "slo:\n  ttft_p99_ms: 1\n")
    result = measure_configuration(step, tmp_path / "runs", repeats=1, objective="qps",
                                   engine_factory=MockEngine(ttft_ms=20))
    assert result.status == "ok" and result.slo_met is False and result.samples[0] > 0


def test_step_figures_of_nothing():
    assert step_figures(None) == {}


def test_while_serving_runs_once_on_the_first_repeats_live_server(tmp_path, tiny_model_dir):
    """The optimize gate's hook: called with the first repeat's server URL after its load
    test, while that server still answers, and not again on later repeats."""
    import requests

    step = mock_recipe(tmp_path, tiny_model_dir).varied({"engine.max_num_seqs": 2}, "test")
    seen = []

    def on_server(base_url: str) -> None:
        seen.append((base_url, requests.get(f"{base_url}/v1/models", timeout=10).status_code))

    result = measure_configuration(step, tmp_path / "runs", repeats=2, objective="qps",
                                   engine_factory=MockEngine(ttft_ms=2),
                                   while_serving=on_server)
    assert result.status == "ok" and len(result.run_ids) == 2
    assert len(seen) == 1 and seen[0][0].startswith("http://127.0.0.1:") and seen[0][1] == 200
