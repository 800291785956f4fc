"""`mopt diff` on hand-made archives and recipe files: fields, deltas, verdicts, warning."""

import pytest

from model_optimizer.archive.manifest import ArchiveError
from model_optimizer.history.diff import diff, field_changes, flatten, render

from .fakes import make_run, tiny_recipe

SEQS4 = ["engine.max_num_seqs=4", "workload.concurrency=4"]
SEQS1 = ["engine.max_num_seqs=1", "workload.concurrency=4"]


@pytest.fixture
def recipe(tmp_path):
    return tiny_recipe(tmp_path)


def row(result, metric):
    return next(r for r in result.metrics if r.metric == metric)


def test_flatten_and_field_changes():
    assert flatten({"a": {"b": 1, "c": {"d": [1, 2]}}, "e": {}}) == {"a.b": 1, "a.c.d": [1, 2]}
    changes = field_changes({"revision": 1, "engine": {"x": 1}, "sweep": {"max": 2}},
                            {"revision": 2, "engine": {"x": 2}, "sweep": {"max": 4}})
    assert [(c.path, c.counted) for c in changes] == [("engine.x", True), ("revision", False),
                                                      ("sweep.max", False)]


def test_an_env_filled_from_empty_counts_once():
    changes = field_changes({"engine": {"env": {}, "max_num_seqs": 4}},
                            {"engine": {"env": {"VLLM_CPU_KVCACHE_SPACE": "2"},
                                        "max_num_seqs": 4}})
    assert [(c.path, c.a, c.b) for c in changes] == [
        ("engine.env.VLLM_CPU_KVCACHE_SPACE", None, "2")]


def test_two_runs_of_the_same_recipe_show_no_significant_change(tmp_path, recipe):
    runs = tmp_path / "runs"
    a = make_run(runs, recipe, SEQS4, seed=1)
    b = make_run(runs, recipe, SEQS4, seed=2)
    result = diff(a.name, str(b), runs)
    assert result.fields == [] and result.warning is None
    assert result.significant() == []
    assert row(result, "ttft_p50_ms").judgement.p_value is not None
    assert row(result, "qps").judgement.interval is not None
    text = "\n".join(render(result))
    assert "identical configuration" in text and "Significant changes: none" in text


def test_four_times_max_num_seqs_is_a_significant_throughput_change(tmp_path, recipe):
    runs = tmp_path / "runs"
    a = make_run(runs, recipe, SEQS4, seed=1)
    b = make_run(runs, recipe, SEQS1, seed=2)
    result = diff(str(a), str(b), runs)
    assert [(f.path, f.a, f.b) for f in result.fields] == [("engine.max_num_seqs", 4, 1)]
    assert result.warning is None
    qps = row(result, "qps")
    assert qps.judgement.significant and qps.change < -0.5
    assert row(result, "output_tok_s").judgement.significant
    assert "qps" in result.significant()
    assert row(result, "ttft_p99_ms").judgement.verdict == "not judged"


def test_two_changed_fields_warn(tmp_path, recipe):
    runs = tmp_path / "runs"
    a = make_run(runs, recipe, SEQS4)
    b = make_run(runs, recipe, ["engine.max_num_seqs=1", "workload.concurrency=1"], seed=3)
    result = diff(str(a), str(b), runs)
    assert result.variables == ["engine.max_num_seqs", "workload.concurrency"]
    assert "cannot say which one mattered" in result.warning
    assert any(line.startswith("warning:") for line in render(result))


def test_recipe_files_compare_fields_only(tmp_path, recipe):
    other = tmp_path / "other.yaml"
    other.write_text(recipe.read_text().replace("max_num_seqs: 8", "max_num_seqs: 16")
                     .replace("revision: 1", "revision: 5"))
    result = diff(str(recipe), str(other), tmp_path / "runs")
    assert [(f.path, f.counted) for f in result.fields] == [("engine.max_num_seqs", True),
                                                           ("revision", False)]
    assert result.metrics == [] and result.warning is None
    assert "not compared" in "\n".join(render(result))


def test_a_tampered_archive_is_refused(tmp_path, recipe):
    runs = tmp_path / "runs"
    a, b = make_run(runs, recipe), make_run(runs, recipe, seed=1)
    with open(b / "requests.jsonl", "a") as handle:
        handle.write('{"warmup": false, "ok": true, "ttft_s": 0.001}\n')
    with pytest.raises(ArchiveError, match="requests.jsonl: tampered"):
        diff(str(a), str(b), runs)


def test_tpot_of_coalesced_outputs_is_not_judged(tmp_path, recipe):
    runs = tmp_path / "runs"
    a = make_run(runs, recipe, SEQS4, seed=1)
    b = make_run(runs, recipe, SEQS1, seed=2, tpot_ms=0.0)  # every output in one chunk
    result = diff(str(a), str(b), runs)
    assert len(result.coalesced) == 1 and "one socket read" in result.coalesced[0]
    assert row(result, "tpot_p50_ms").judgement.verdict == "not judged"
    assert "qps" in result.significant()  # throughput is still judged
    assert any("TPOT is not judged" in line for line in render(result))


def test_same_configuration_on_a_slower_run_is_run_to_run_noise(tmp_path, recipe):
    """A whole run slowed by the machine (3x latencies) is not blamed on the recipe..."""
    runs = tmp_path / "runs"
    a = make_run(runs, recipe, SEQS4, seed=1)
    b = make_run(runs, recipe, SEQS4, seed=2, ttft_ms=150.0, tpot_ms=30.0)
    result = diff(str(a), str(b), runs)
    assert result.significant() == []
    assert row(result, "qps").judgement.verdict == "run-to-run noise"
    assert row(result, "qps").change < -0.5  # the figures are still shown
    assert "run-to-run variance" in "\n".join(render(result))


def test_same_configuration_on_another_vllm_is_judged(tmp_path, recipe):
    """...but the same slowdown after a vLLM upgrade is a significant change."""
    runs = tmp_path / "runs"
    a = make_run(runs, recipe, SEQS4, seed=1)
    b = make_run(runs, recipe, SEQS4, seed=2, ttft_ms=150.0, tpot_ms=30.0, vllm="0.33.0")
    result = diff(str(a), str(b), runs)
    assert "qps" in result.significant()
