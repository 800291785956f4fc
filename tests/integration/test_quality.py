"""The quality gate on the real vLLM CPU server with the tiny *trained* model.

One server is shared by the module (evals against it use its URL, as ``--url`` does); three
more launches prove what needs a launch: a fresh launch agrees with that server exactly, and
a kv_cache_dtype sweep gated against the server's eval (one launch measures ``auto``'s speed,
one evaluates ``fp8``, whose figures are archived) keeps ``auto`` because the gate demands
more than fp8 achieves.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from model_optimizer.archive import RunArchive
from model_optimizer.quality import evaluate
from model_optimizer.quality.evaluate import serve
from model_optimizer.quality.lmeval import run_lm_eval
from model_optimizer.recipe import load_recipe
from model_optimizer.telemetry import cpu_flags

from .conftest import ROOT, run_mopt

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # not in the quick real-engine tier
RECIPE = ROOT / "recipes" / "tiny-trained-cpu.yaml"


def write_recipe(folder: Path, model: Path) -> Path:
    """The trained recipe with absolute model and example paths, in ``folder``."""
    text = (RECIPE.read_text().replace("../models/tiny-llama-trained", str(model))
            .replace("../examples/", f"{ROOT / 'examples'}/"))
    path = folder / "tiny-trained-cpu.yaml"
    path.write_text(text)
    return path


def ok_json(result) -> dict:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def served(trained_model, tmp_path_factory):
    """One vLLM server of the trained recipe for the whole module, and a runs folder."""
    base = tmp_path_factory.mktemp("quality")
    recipe = write_recipe(base, trained_model)
    loaded = load_recipe(recipe)
    holder = RunArchive.create(base / "server", "server", kind="eval")
    with serve(loaded, holder, lambda event: None) as endpoint:
        yield SimpleNamespace(recipe=recipe, loaded=loaded, endpoint=endpoint,
                              runs=base / "runs")
    holder.set_status("ok")
    holder.close()


@pytest.fixture(scope="module")
def first_eval(served):
    """An eval of the shared server: the baseline of the other tests."""
    return evaluate(served.loaded, url=served.endpoint.base_url, runs_base=served.runs)


def test_same_server_twice_agrees_perfectly_and_the_model_has_something_to_lose(
        served, first_eval):
    assert first_eval.result.ok, first_eval.result.failure
    again = evaluate(served.loaded, url=served.endpoint.base_url, runs_base=served.runs,
                     baseline=first_eval.result.run_id)
    figures = again.comparison.figures()
    assert figures["prompts"] == 40 and figures["positions"] > 40
    assert figures["exact_match_rate"] == 1.0 and figures["diverged"] == 0
    assert figures["top1_agreement"] == 1.0
    assert figures["mean_kl"] == 0.0 and figures["max_kl"] == 0.0
    assert again.gate.passed, again.gate.reasons
    own = first_eval.result.figures()
    assert own["accuracy"] >= 0.5, own          # a real accuracy on the task grammar
    top_probs = [math.exp(max(d.values())) for s in first_eval.result.scores for d in s.dists]
    assert sum(top_probs) / len(top_probs) > 0.8    # confident, unlike random weights
    archive = Path(again.result.archive)
    assert len((archive / "fidelity.jsonl").read_text().splitlines()) == 40
    outputs = [json.loads(line) for line in (archive / "outputs.jsonl").read_text().splitlines()]
    assert all(o["token_ids"] and o["top_logprobs"] and o["seed"] == 0 for o in outputs)


def test_a_fresh_launch_agrees_perfectly_and_apply_reports_quality(served, first_eval):
    """`mopt apply` launches a new server, load-tests it, then evaluates on that server
    against the shared server's eval: identical answers and distributions."""
    result = ok_json(run_mopt("apply", str(served.recipe), "--runs-dir", str(served.runs),
                              "--set", f"quality.baseline={first_eval.result.archive}",
                              "--set", "workload.num_requests=16", "--json"))
    assert result["status"] == "ok" and result["metrics"]["completed"] == 16
    quality = result["quality"]
    figures = quality["comparison"]["figures"]
    assert (figures["exact_match_rate"], figures["top1_agreement"]) == (1.0, 1.0)
    assert figures["mean_kl"] == 0.0 and figures["max_kl"] == 0.0
    assert quality["gate"]["passed"] and "launch" not in quality["timings_s"]
    index = run_mopt("runs", "--runs-dir", str(served.runs), "--json")
    kinds = {row["id"]: row["kind"] for row in json.loads(index.stdout)}
    assert kinds[quality["run_id"]] == "eval" and kinds[result["run_id"]] == "run"


def test_lm_eval_runs_a_local_jsonl_task_offline(served, first_eval, tmp_path):
    config = first_eval.result.config.lm_eval
    from dataclasses import replace

    scores = run_lm_eval(served.endpoint.base_url, served.endpoint.model,
                         served.endpoint.tokenizer_dir,
                         replace(config, tasks=("mopt_tiny_tasks",)), tmp_path / "lm", seed=0)
    [task] = scores
    assert task.task == "mopt_tiny_tasks" and task.samples == 40
    assert task.metric.startswith("exact_match")
    assert task.value == pytest.approx(first_eval.result.figures()["accuracy"])


def test_sweep_keeps_auto_when_fp8_fails_a_tighter_gate_or_cannot_run(served, first_eval):
    """max_mean_kl 0 demands identical next-token distributions; fp8 keys and values do not
    give them. The fp8 eval is archived with its figures; the revision written keeps auto.
    On a CPU without AVX-512 or AMX vLLM cannot hold an fp8 KV cache: the sweep skips fp8
    before any launch (no eval, no load test) and keeps auto all the same."""
    result = run_mopt("sweep", str(served.recipe), "--runs-dir", str(served.runs),
                      "--param", "kv_cache_dtype", "--values", "auto,fp8",
                      "--set", "quality.thresholds.max_mean_kl=0",
                      "--set", f"quality.baseline={first_eval.result.archive}",
                      "--set", "workload.num_requests=24",
                      "--set", "workload.warmup_steady_max_s=null", "--json", timeout=1800)
    sweep = ok_json(result)
    assert sweep["chosen"]["value"] == "auto"
    steps = Path(sweep["archive"]) / "steps"
    evals = [p for p in steps.iterdir()
             if json.loads((p / "status.json").read_text()).get("kind") == "eval"]
    if not cpu_flags() & {"avx512f", "amx_tile"}:
        state = json.loads((Path(sweep["archive"]) / "state.json").read_text())
        assert state["figures"]["fp8"]["status"] == "skipped"
        assert "needs AVX-512 or AMX" in state["figures"]["fp8"]["reason"]
        assert evals == []                          # nothing launched with fp8
        assert {yaml.safe_load((p / "recipe.resolved.yaml").read_text())["engine"]
                ["kv_cache_dtype"] for p in steps.iterdir()} == {"auto"}
        _check_written(served)
        return
    assert "fp8 failed the quality gate" in sweep["reason"]
    assert "mean KL" in sweep["reason"] and "above the maximum 0" in sweep["reason"]
    [fp8_eval] = evals                      # auto is not re-evaluated: nothing output-changing
    quality = json.loads((fp8_eval / "quality.json").read_text())
    figures = quality["comparison"]["figures"]
    resolved = (fp8_eval / "recipe.resolved.yaml").read_text()
    assert "kv_cache_dtype: fp8" in resolved
    assert quality["baseline_run"] == first_eval.result.run_id
    assert figures["mean_kl"] > 0.0 and figures["positions"] > 40
    assert 0.0 <= figures["top1_agreement"] <= 1.0 and quality["gate"]["passed"] is False
    print("fp8 KV cache vs auto, tiny trained model:", json.dumps(figures))
    _check_written(served)
    diff = run_mopt("diff", str(served.recipe), str(fp8_eval), "--runs-dir", str(served.runs))
    assert diff.returncode == 0 and "Quality (against" in diff.stdout
    assert "gate_passed" in diff.stdout


def _check_written(served) -> None:
    written = load_recipe(served.recipe).resolved
    assert written["revision"] == 2 and written["engine"]["kv_cache_dtype"] == "auto"
    validated = written["validated"]
    assert validated["by"] == "sweep" and validated["quality"]["passed"] is True
    assert validated["metrics"]["qps"] > 0
