"""`mopt init` writes a quality section that gates: the shipped eval set, or the user's
prompts split into a fixed eval set and a calibration set."""

from __future__ import annotations

import json

import yaml
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.onboard.prompts import read_prompt_texts
from model_optimizer.quality import quality_of
from model_optimizer.quality.evalset import load_eval_set
from model_optimizer.recipe import load_recipe

from .test_init import TINY, _model

runner = CliRunner()


def _init(tmp_path, *extra):
    model_dir = _model(tmp_path, TINY)
    out = tmp_path / "recipes" / "r.yaml"
    result = runner.invoke(app, ["init", str(model_dir), "-o", str(out), "--accelerator",
                                 "cpu", "--memory-gib", "4", *extra])
    assert result.exit_code == 0, result.output
    return out


def test_without_prompts_the_shipped_eval_set_gates_per_class(tmp_path):
    out = _init(tmp_path)
    section = yaml.safe_load(out.read_text())["quality"]
    assert section["eval_set"] == "mopt:general"
    assert section["thresholds"] == {"min_top1_agreement": 0.9, "max_accuracy_drop": 0.05}
    assert "# lm_eval: {tasks: [gsm8k]" in out.read_text()  # offered, not switched on
    config = quality_of(load_recipe(out))
    assert config.gate_problem is None
    assert {i.item_class for i in load_eval_set(config.eval_set)} == {"general", "math", "code"}
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.yaml"]  # nothing else written


def test_prompts_split_into_a_fixed_eval_set_and_the_calibration_rest(tmp_path):
    prompts = tmp_path / "p.jsonl"
    lines = [{"prompt": f"question {n}"} for n in range(9)]
    lines[1] = {"messages": [{"role": "user", "content": "a chat"}]}
    prompts.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out = _init(tmp_path, "--prompts", str(prompts))
    loaded = load_recipe(out)
    config = quality_of(loaded)
    assert config.gate_problem is None
    assert loaded.resolved["quality"]["thresholds"]["min_top1_agreement"] == 0.9
    # no references in the user's prompts: no accuracy threshold that could not be measured
    assert loaded.resolved["quality"]["thresholds"]["max_accuracy_drop"] is None
    items = load_eval_set(config.eval_set)
    assert [i.id for i in items] == ["prompt-1", "prompt-2", "prompt-3", "prompt-4"]
    assert items[0].prompt == "question 0" and items[1].messages[0]["content"] == "a chat"
    calibration = loaded.resolved["quantize"]["calibration"]["file"]
    assert calibration == "r.calibration.jsonl"
    rest = read_prompt_texts(out.parent / calibration)
    assert rest == [f"question {n}" for n in range(4, 9)]  # never both eval and calibration


def test_at_most_32_prompts_are_evaluated(tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"q{n}"}) + "\n" for n in range(100)))
    out = _init(tmp_path, "--prompts", str(prompts))
    assert len(load_eval_set(quality_of(load_recipe(out)).eval_set)) == 32
    assert len(read_prompt_texts(out.parent / "r.calibration.jsonl")) == 68
