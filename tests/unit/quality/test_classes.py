"""Eval-set classes: the per-class accuracy drop, its gate check, and the shipped set."""

from pathlib import Path

import pytest

from model_optimizer.errors import UsageError
from model_optimizer.quality.client import Generation
from model_optimizer.quality.compare import compare_evals
from model_optimizer.quality.config import QualityConfig, Thresholds, quality_config
from model_optimizer.quality.evalset import builtin_eval_set, load_eval_set, parse_eval_set
from model_optimizer.quality.gate import judge
from model_optimizer.quality.result import EvalResult

SET = "\n".join([
    '{"id": "g1", "class": "general", "prompt": "p", "reference": "Paris", "scorer": "contains"}',
    '{"id": "g2", "class": "general", "prompt": "p", "reference": "cold", "scorer": "contains"}',
    '{"id": "m1", "class": "math", "prompt": "p", "reference": "5", "scorer": "number"}',
    '{"id": "m2", "class": "math", "prompt": "p", "reference": "6", "scorer": "number"}',
    '{"id": "free", "prompt": "no reference, no class"}',
])


def result(answers: dict[str, str], run_id: str) -> EvalResult:
    items = parse_eval_set(SET, "set.jsonl")
    gens = [Generation(item.id, 0, answers.get(item.id, ""), [1], [2]) for item in items]
    return EvalResult(run_id, Path(run_id), "ok", QualityConfig(), items, [gens])


BASE = {"g1": "Paris.", "g2": "cold", "m1": "5", "m2": "6"}


def test_class_is_parsed_kept_and_checked():
    items = parse_eval_set(SET, "set.jsonl")
    assert [i.item_class for i in items] == ["general", "general", "math", "math", None]
    assert items[0].to_dict()["class"] == "general" and "class" not in items[4].to_dict()
    with pytest.raises(UsageError, match=r"set.jsonl:1: class must be a short name"):
        parse_eval_set('{"prompt": "p", "class": "two words"}', "set.jsonl")


def test_accuracy_and_its_drop_are_reported_per_class():
    base = result(BASE, "base")
    assert base.classes() == ["general", "math"]
    assert base.figures()["accuracy_by_class"] == {"general": 1.0, "math": 1.0}
    worse = result({**BASE, "m1": "4", "m2": "seven"}, "cand")  # math lost, general kept
    figures = compare_evals(base, worse).figures()
    assert figures["accuracy_drop"] == 0.5
    assert figures["accuracy_drop.math"] == 1.0 and figures["accuracy_drop.general"] == 0.0
    assert (figures["baseline_accuracy.math"], figures["accuracy.math"]) == (1.0, 0.0)


def test_the_gate_fails_on_one_class_even_when_the_whole_set_is_within_the_limit():
    many = SET + "\n" + "\n".join(
        f'{{"id": "g{n}", "class": "general", "prompt": "p", "reference": "x", '
        f'"scorer": "contains"}}' for n in range(3, 20))
    items = parse_eval_set(many, "set.jsonl")

    def run(answers, run_id):
        gens = [Generation(i.id, 0, answers.get(i.id, "x"), [1], [2]) for i in items]
        return EvalResult(run_id, Path(run_id), "ok", QualityConfig(), items, [gens])

    base = run(BASE, "base")
    cand = run({**BASE, "m2": "9"}, "cand")  # one math item of 21 scored: 4.8 points overall
    verdict = judge(compare_evals(base, cand), Thresholds(max_accuracy_drop=0.1))
    assert not verdict.passed
    by_name = {c.name: c for c in verdict.checks}
    assert by_name["max_accuracy_drop"].passed  # the whole set drops < 0.1
    failed = by_name["max_accuracy_drop[class math]"]
    assert not failed.passed and failed.value == 0.5
    assert verdict.reasons == ["class math accuracy 1.000 -> 0.500 (drop +0.500; limit 0.1)"]
    assert by_name["max_accuracy_drop[class general]"].passed


def test_the_shipped_general_set_loads_with_its_three_classes_and_a_licence():
    path = builtin_eval_set("mopt:general")
    items = load_eval_set(path)
    assert len(items) == 24 and all(item.scored for item in items)
    classes = [item.item_class for item in items]
    assert {c: classes.count(c) for c in set(classes)} == {"general": 8, "math": 8, "code": 8}
    assert "licence: CC0-1.0" in path.read_text()
    assert quality_config({"quality": {"eval_set": "mopt:general"}}).eval_set == str(path)
    with pytest.raises(UsageError, match="shipped: mopt:general"):
        quality_config({"quality": {"eval_set": "mopt:nope"}})


def test_gate_problem_names_what_is_missing():
    assert QualityConfig().gate_problem == "the quality section names no eval set or " \
                                           "lm-eval task"
    assert QualityConfig(eval_set="x").gate_problem == "the quality section sets no thresholds"
    assert QualityConfig(eval_set="x", thresholds=Thresholds(max_mean_kl=0.1)
                         ).gate_problem is None
