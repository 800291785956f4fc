"""``usecase.evaluate`` (what `mopt eval` calls) on the mock engine: a launch evaluated and
archived, then the same recipe against that eval as its baseline once the server's
answers changed: the gate fails and the exit code says so. Its usage errors refuse before
anything is archived."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

import model_optimizer.engine.factory as factory
from model_optimizer.engine.factory import MockEngine
from model_optimizer.errors import (
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_SLO_FAILED,
    EXIT_START_FAILED,
    UsageError,
)
from model_optimizer.usecase import Notice, evaluate
from model_optimizer.usecase.eval import EvaluateResult
from tests.unit.mock_engine import alive, children_pids, mock_recipe

ITEMS = [("The capital of France is", "Paris"), ("The opposite of hot is", "cold"),
         ("There are seven days in a", "week"), ("Water freezes into", "ice")]
QUALITY = """\
quality:
  eval_set: set.jsonl
  max_tokens: 8
  thresholds:
    min_exact_match: 0.99
"""


def write_set(folder, items=ITEMS):
    lines = [{"id": f"q{n}", "prompt": p, "reference": r, "scorer": "contains"}
             for n, (p, r) in enumerate(items)]
    (folder / "set.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def serve_answers(monkeypatch, file, wrong: int = 0):
    """The mock engine answers each prompt from ``file``; the first ``wrong`` wrongly."""
    file.write_text(json.dumps({p: (" no idea" if n < wrong else f" {r}, of course.")
                                for n, (p, r) in enumerate(ITEMS)}))
    monkeypatch.setattr(factory, "VllmEngine",
                        lambda: MockEngine(answers=(("mock-served", str(file)),)))


def test_an_eval_then_the_same_recipe_against_it_once_its_answers_changed(
        tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("MOPT_TEST_SECRET_TOKEN", "x")
    write_set(tmp_path)
    recipe = mock_recipe(tmp_path, tiny_model_dir, QUALITY).path
    runs, answers, before = tmp_path / "runs", tmp_path / "answers.json", children_pids()
    serve_answers(monkeypatch, answers)
    told: list[Notice] = []
    first = evaluate(recipe, runs_base=runs, on_notice=told.append)
    assert first.exit_code == EXIT_OK and first.outcome.result.ok
    assert first.outcome.gate is None  # no baseline: nothing to judge against
    assert first.outcome.result.figures()["accuracy"] == 1.0
    assert first.outcome.result.archive.parent.resolve() == runs.resolve()
    assert [n.text for n in told] == first.preflight
    serve_answers(monkeypatch, answers, wrong=2)
    second = evaluate(recipe, baseline=str(first.outcome.result.archive), runs_base=runs)
    assert second.outcome.result.ok and not second.outcome.gate.passed
    assert second.outcome.comparison.figures()["exact_match_rate"] == 0.5
    assert second.exit_code == EXIT_SLO_FAILED and second.to_dict()["gate"]["passed"] is False
    assert not alive(children_pids() - before)  # each server stopped


def test_nothing_to_evaluate_and_a_broken_set_refuse_before_an_archive(tmp_path,
                                                                         tiny_model_dir):
    runs = tmp_path / "runs"
    plain = mock_recipe(tmp_path, tiny_model_dir)
    with pytest.raises(UsageError, match="nothing to evaluate") as nothing:
        evaluate(plain, url="http://127.0.0.1:9", runs_base=runs)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"prompt": "p", "scorer": "fuzzy", "reference": "r"}\n')
    with pytest.raises(UsageError, match=f"{bad}:2: unknown scorer 'fuzzy'") as broken:
        evaluate(plain.path, eval_set=bad, url="http://127.0.0.1:9", runs_base=runs)
    assert nothing.value.exit_code == broken.value.exit_code == 2
    assert not runs.exists()


def _result(ok: bool, failure_file: bool, passed: bool | None, folder) -> EvaluateResult:
    if failure_file:
        (folder / "failure.json").write_text("{}")
    result = SimpleNamespace(ok=ok, archive=folder)
    gate = None if passed is None else SimpleNamespace(passed=passed)
    return EvaluateResult(SimpleNamespace(result=result, gate=gate))  # type: ignore[arg-type]


@pytest.mark.parametrize(("ok", "failure_file", "passed", "code"), [
    (True, False, None, EXIT_OK), (True, False, True, EXIT_OK),
    (True, False, False, EXIT_SLO_FAILED), (False, True, None, EXIT_START_FAILED),
    (False, False, None, EXIT_RUN_FAILED)])
def test_the_exit_code_merges_the_eval_and_its_gate(tmp_path, ok, failure_file, passed, code):
    assert _result(ok, failure_file, passed, tmp_path).exit_code == code
