"""A tiny-CPU recipe with a chosen tune section, and a deterministic fake measurement."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_optimizer.search.measure import Measurement
from model_optimizer.search.tune.evaluate import TrialResult

ROOT = Path(__file__).resolve().parents[4]
SPACE = """tune:
  params:
    max_num_seqs: {type: int_log, low: 1, high: 32}
    block_size: {type: categorical, choices: [32, 64, 128]}
  n_trials: 8
"""


def recipe_text(tune: str = SPACE, slo_ttft_p99_ms: float = 1500) -> str:
    """tiny-cpu.yaml with an absolute model path, a p99 TTFT SLO and ``tune`` as given."""
    text = (ROOT / "recipes" / "tiny-cpu.yaml").read_text()
    text = text[: text.index("\ntune:")] + "\n" + tune
    text = text.replace("../models/tiny-llama", str(ROOT / "models" / "tiny-llama"))
    return text.replace("ttft_p99_ms: 5000", f"ttft_p99_ms: {slo_ttft_p99_ms}")


@pytest.fixture
def make_recipe(tmp_path):
    """Write a recipe file with the given tune section; returns its path."""
    def make(tune: str = SPACE, **kwargs) -> Path:
        path = tmp_path / "tiny.yaml"
        path.write_text(recipe_text(tune, **kwargs))
        return path
    return make


class FakeMeasure:
    """Throughput grows with max_num_seqs up to 8, block_size 64 is 10% faster, p99 TTFT is
    100 ms per sequence; block_size 128 with 16+ sequences fails (kv_cache_too_small); more
    than 24 sequences is skipped by the 'planner'. Raises Ctrl-C at call ``interrupt_at``."""

    def __init__(self, interrupt_at: int | None = None):
        self.calls: list[dict] = []
        self.interrupt_at = interrupt_at

    def __call__(self, step, number: int, params: dict) -> TrialResult:
        if self.interrupt_at is not None and len(self.calls) + 1 == self.interrupt_at:
            raise KeyboardInterrupt
        self.calls.append(dict(params))
        engine = step.resolved["engine"]
        seqs, block = engine["max_num_seqs"], engine["block_size"]
        if seqs > 24:
            return TrialResult(Measurement("skipped", failure_kind="planner",
                                           reason=f"{seqs} sequences need too much KV cache"))
        if block == 128 and seqs >= 16:
            failure = {"class": "kv_cache_too_small", "hint": "lower max_model_len",
                       "evidence": ["ValueError: To serve at least one request with the "
                                    "model's max seq len (512)"]}
            return TrialResult(Measurement("failed", failure_kind="kv_cache_too_small",
                                           reason="lower max_model_len",
                                           run_ids=[f"run-{number}"]), [], failure)
        qps = round(3.0 * min(seqs, 8) * (1.1 if block == 64 else 1.0), 3)
        metrics = {"qps": qps, "goodput_qps": qps, "output_tok_s": qps * 32,
                   "ttft_p99_ms": 100.0 * seqs, "tpot_p50_ms": 4.0, "success_rate": 1.0}
        slo_met = metrics["ttft_p99_ms"] <= step.resolved["slo"]["ttft_p99_ms"]
        measured = Measurement("ok", samples=[qps], slo_met=slo_met, run_ids=[f"run-{number}"],
                               figures={**metrics, "status": "ok"})
        return TrialResult(measured, [metrics])
