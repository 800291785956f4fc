"""`mopt diff` shows quality figures: eval archives, and validated blocks of recipes."""

import yaml

from model_optimizer.archive import RunArchive, utc_now
from model_optimizer.history.diff import diff, render
from model_optimizer.recipe import load_recipe

from ..archive.fakes import tiny_recipe


def with_validated_quality(path, kl, passed):
    document = yaml.safe_load(path.read_text())
    document["validated"] = {
        "at": utc_now(), "run_id": "20260101T000000Z-tiny-abc123", "by": "sweep",
        "metrics": {"qps": 10.0},
        "quality": {"passed": passed, "baseline_run": "base-1", "eval_run": "eval-2",
                    "figures": {"exact_match_rate": 1.0, "top1_agreement": 0.99,
                                "mean_kl": kl}}}
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def eval_archive(runs, recipe, kl, accuracy):
    loaded = load_recipe(recipe)
    archive = RunArchive.create(runs, loaded.name, kind="eval")
    archive.write_yaml("recipe.resolved.yaml", loaded.resolved)
    archive.write_json("run.json", {"id": archive.id, "kind": "eval", "created_at": utc_now(),
                                    "recipe_name": loaded.name, "versions": {"vllm": "0.32.0"},
                                    "hardware": {"cpu_model": "Test CPU"}})
    archive.write_json("quality.json", {
        "figures": {"accuracy": accuracy}, "baseline_run": "base-1",
        "comparison": {"figures": {"exact_match_rate": 0.9, "top1_agreement": 0.98,
                                   "mean_kl": kl}},
        "gate": {"passed": kl < 0.01}})
    archive.set_status("ok", phase="finished", finished_at=utc_now())
    archive.close()
    return archive.path


def test_recipe_files_show_the_quality_of_their_validated_blocks(tmp_path):
    a = with_validated_quality(tiny_recipe(tmp_path, "a.yaml"), 0.0, True)
    b = with_validated_quality(tiny_recipe(tmp_path, "b.yaml"), 0.0123, False)
    result = diff(a, b, tmp_path / "runs")
    rows = {k: (x, y) for k, x, y in result.quality_rows}
    assert rows["mean_kl"] == (0.0, 0.0123) and rows["gate_passed"] == (True, False)
    text = "\n".join(render(result))
    assert "Quality (against each side's baseline" in text and "0.0123" in text
    assert result.to_dict()["quality"][0]["figure"] == "exact_match_rate"


def test_eval_archives_are_compared_on_quality_not_load(tmp_path):
    recipe = tiny_recipe(tmp_path)
    runs = tmp_path / "runs"
    a = eval_archive(runs, recipe, 0.0, 0.9)
    b = eval_archive(runs, recipe, 0.02, 0.7)
    result = diff(a.name, str(b), runs)
    assert result.metrics == [] and result.a.kind == "eval"
    rows = {k: (x, y) for k, x, y in result.quality_rows}
    assert rows["accuracy"] == (0.9, 0.7) and rows["mean_kl"] == (0.0, 0.02)
    assert rows["gate_passed"] == (True, False)
    assert "Figures: not compared" in "\n".join(render(result))
