"""Each archive kind writes its own index entry; the index reads that one format only."""

import json
import re
from pathlib import Path

import pytest

from model_optimizer.archive import RunArchive, entry, index
from model_optimizer.recipe import load_recipe
from model_optimizer.search.measure import Measurement
from model_optimizer.search.sweep.flags import SweepFlags
from model_optimizer.search.sweep.loop import start_sweep

from .fakes import make_run, tiny_recipe

INDEX_SOURCE = Path(index.__file__).read_text()


@pytest.fixture
def recipe(tmp_path):
    return tiny_recipe(tmp_path)


def test_a_run_keeps_its_row_in_its_status_and_the_index_reads_nothing_else(tmp_path, recipe):
    runs = tmp_path / "runs"
    folder = make_run(runs, recipe, ["engine.max_num_seqs=4"])
    metrics = json.loads((folder / "metrics.json").read_text())
    for name in ("run.json", "metrics.json", "recipe.resolved.yaml", "recipe.given.yaml"):
        (folder / name).unlink()  # the run's own layout is gone; its entry is not
    index.refresh(runs, full=True)
    [row] = index.all_rows(runs)
    assert row["recipe_name"] == "tiny-cpu" and row["hardware"] == "Test CPU 9000"
    assert row["qps"] == pytest.approx(metrics["qps"]) and row["vllm_version"] == "0.32.0"
    assert len(row["recipe_hash"]) == 16


def test_a_sweep_enters_the_revision_it_wrote(tmp_path, recipe):
    def measure(step, value):
        qps = {1: 4.0, 2: 7.5, 4: 13.0}.get(value, 13.5)
        return Measurement("ok", samples=[qps], slo_met=True, run_ids=[f"run-{value}"],
                           figures={"qps": qps, "status": "ok"})

    loaded = load_recipe(recipe, ["sweep.confirm_duration_s=0", "sweep.max=4"])
    outcome = start_sweep(loaded, tmp_path / "runs", flags=SweepFlags(start=1),
                          measure=measure)
    status = json.loads((outcome.archive / "status.json").read_text())
    written = load_recipe(recipe).resolved
    assert status["entry"]["recipe_revision"] == 2
    assert status["entry"]["qps"] == written["validated"]["metrics"]["qps"]
    assert status["entry"]["recipe_hash"] == entry.config_hash(written)
    [row] = index.all_rows(tmp_path / "runs")
    assert row["kind"] == "sweep" and row["recipe_revision"] == 2
    assert row["hardware"] == written["validated"]["hardware"]


def test_an_entry_takes_only_entry_fields(tmp_path):
    archive = RunArchive.create(tmp_path, "x")
    archive.write_entry(recipe_name="x", qps=1.5)
    archive.write_entry(qps=2.0)  # merged, not replaced
    assert archive.read_status()["entry"] == {"recipe_name": "x", "qps": 2.0}
    with pytest.raises(ValueError, match="not index entry fields: state"):
        archive.write_entry(state={})


def test_the_index_knows_no_kind_s_layout():
    for name in ("RUN_FILE", "STATE_FILE", "WRITTEN_RECIPE", "GIVEN_RECIPE", "METRICS_FILE",
                 "RESOLVED_RECIPE", "SUMMARY_FILE"):
        assert name not in INDEX_SOURCE
    assert not re.search(r'"(sweep|tune|rollback)"', INDEX_SOURCE)
    assert "import model_optimizer.recipe" not in INDEX_SOURCE
    assert "from model_optimizer.recipe" not in INDEX_SOURCE
