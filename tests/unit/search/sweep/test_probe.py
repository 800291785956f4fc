"""Probe-scan: when it is valid, its ceiling, and how a scan level becomes a strategy point."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from model_optimizer.errors import UsageError
from model_optimizer.recipe import load_recipe
from model_optimizer.search.sweep.probe import (
    level_point,
    probe_scan_problems,
    resolve_strategy,
    scan_ceiling,
)
from model_optimizer.search.sweep.strategy import SweepConfig, growth_stop

ROOT = Path(__file__).resolve().parents[4]
TINY_CONFIG = {"architectures": ["LlamaForCausalLM"], "hidden_size": 256, "head_dim": 64,
               "intermediate_size": 512, "num_hidden_layers": 4, "num_attention_heads": 4,
               "num_key_value_heads": 2, "vocab_size": 512, "dtype": "bfloat16",
               "max_position_embeddings": 2048, "tie_word_embeddings": False}


def tiny(*overrides: str):
    return load_recipe(ROOT / "recipes" / "tiny-cpu.yaml", list(overrides))


def seqs(**extra) -> SweepConfig:
    return SweepConfig(**{"param": "max_num_seqs", "start": 1, "max": 64, **extra})


def test_auto_picks_probe_fit_for_a_tied_closed_loop():
    recipe = tiny().resolved
    assert probe_scan_problems(recipe, seqs()) == []
    strategy, why = resolve_strategy("auto", recipe, seqs())
    assert strategy == "probe-fit" and "simulator" in why
    assert resolve_strategy("probe-scan", recipe, seqs())[0] == "probe-scan"
    assert resolve_strategy("relaunch", recipe, seqs())[0] == "relaunch"


@pytest.mark.parametrize("overrides, words", [
    (["workload.concurrency=4"], "workload.concurrency is set"),
    (["workload.request_rate=5"], "open-loop"),
])
def test_probe_scan_is_not_valid_when_the_load_does_not_follow_max_num_seqs(overrides, words):
    recipe = tiny(*overrides).resolved
    strategy, why = resolve_strategy("auto", recipe, seqs())
    assert strategy == "relaunch" and words in why
    with pytest.raises(UsageError, match=words):
        resolve_strategy("probe-scan", recipe, seqs())


def test_probe_scan_scans_max_num_seqs_only():
    config = SweepConfig(param="block_size", start=32, max=128)
    assert "needs a restart" in probe_scan_problems(tiny().resolved, config)[0]
    with pytest.raises(UsageError, match="choose one of"):
        resolve_strategy("bisect", tiny().resolved, config)


def test_the_ceiling_is_max_lowered_to_what_the_planner_allows():
    loaded = tiny("engine.max_model_len=512")
    config = TINY_CONFIG   # models/tiny-llama/config.json, as `mopt tiny-model` writes it
    assert scan_ceiling(loaded, seqs(max=64), None) == 64
    planner = scan_ceiling(loaded, seqs(max=100000), config)
    assert 64 < planner < 100000
    with pytest.raises(UsageError, match="needs a ceiling"):
        scan_ceiling(loaded, seqs(max=None), None)


def outcome(qps=50.0, half_width=2.0, kv=0.4, preemptions=0, ok=True, completed=100):
    return SimpleNamespace(
        ok=ok, run_id="level", telemetry_peaks={"kv_cache_usage_perc_max": kv,
                                                "preemptions": preemptions},
        metrics={"qps": qps, "completed": completed, "slo_met": True,
                 "intervals": {"qps": {"half_width": half_width}}})


def test_a_level_carries_its_interval():
    point = level_point(16, "grow", outcome(), "qps")
    assert point.acceptable and point.metric == 50.0 and point.half_width == 2.0
    assert point.launches == 0 and point.run_ids == ["level"]   # no launch of its own
    assert point.slo_ratios == []                     # no latency bound: nothing to judge
    bounded = outcome()
    bounded.metrics["slo_ratio"] = 0.42
    assert level_point(16, "grow", bounded, "qps").slo_ratios == [0.42]


def test_preemptions_or_a_full_kv_cache_mark_the_memory_ceiling():
    config = seqs()
    good = level_point(8, "grow", outcome(qps=30.0, half_width=0.5), "qps")
    preempted = level_point(16, "grow", outcome(preemptions=3), "qps")
    assert growth_stop(config, [good, preempted])[0] == "preemption"
    full = level_point(16, "grow", outcome(kv=0.995), "qps")
    assert full.failure_kind == "kv_cache_full"
    assert growth_stop(config, [good, full])[0] == "memory"
    died = level_point(16, "grow", outcome(ok=False, completed=0), "qps")
    assert growth_stop(config, [good, died])[0] == "failure"


class FakeEngine:
    """The scan server's stand-in: the in-package mock server (no vLLM)."""

    def __init__(self, url: str):
        self.base_url, self.pid = url, None

    def alive(self) -> bool:
        return True


def test_a_scan_level_is_an_archived_window_at_its_concurrency(tmp_path):
    from model_optimizer.load.mock_server import MockServer
    from model_optimizer.search.sweep.probe import ProbeServer

    loaded = tiny("workload.duration_s=1", "workload.warmup_requests=2",
                  "workload.num_requests=40", "workload.warmup_steady_max_s=null")
    probe = ProbeServer(loaded, tmp_path / "steps", 16, "qps", "sweep-id", lambda *a: None)
    with MockServer(model="tiny-llama", ttft_s=0.01, itl_s=0.002) as server:
        probe.engine = FakeEngine(server.url)
        probe.outcome = SimpleNamespace(run_id="server-run")
        point, figures = probe.measure(4, "grow")
        skipped, _ = probe.measure(32, "grow")   # above the scan server's max_num_seqs
    assert point.status == "ok" and point.metric > 0 and point.launches == 0
    [level] = [p for p in (tmp_path / "steps").iterdir() if p.is_dir()]
    run = json.loads((level / "run.json").read_text())
    assert run["probe"] and run["value"] == 4 and run["server_run"] == "server-run"
    assert run["workload"]["concurrency"] == 4
    recipe = yaml.safe_load((level / "recipe.resolved.yaml").read_text())
    assert recipe["engine"]["max_num_seqs"] == 16          # the server that really ran
    records = [json.loads(line) for line in (level / "requests.jsonl").read_text().splitlines()]
    measured = [r for r in records if not r["warmup"]]
    assert len(records) - len(measured) == 2 and len(measured) >= 8
    in_flight = max(sum(1 for o in measured if o["sent_at"] <= r["sent_at"] < o["finished_at"])
                    for r in measured)
    assert in_flight <= 4
    assert figures["run_id"] == run["id"] and skipped.status == "skipped"


def test_a_level_reads_a_class_objective_from_the_class_figures():
    classes = {"short": {"qps": 9.0, "goodput_qps": 8.5}, "long": {"qps": 1.0}}
    level = outcome(qps=10.0)
    level.metrics["classes"] = classes
    assert level_point(4, "grow", level, "short:goodput_qps").metric == 8.5
