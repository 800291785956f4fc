"""The eval-set format: items, scorers and located errors."""

import json
from pathlib import Path

import pytest

from model_optimizer.errors import UsageError
from model_optimizer.models.trained import NUMBERS, beyond_items, corpus, task_items
from model_optimizer.quality.evalset import load_eval_set, parse_eval_set
from model_optimizer.quality.scoring import score

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "quality" / "tiny-tasks.jsonl"


def test_items_with_and_without_reference():
    text = "\n".join([
        '{"id": "a", "prompt": "three plus four is", "reference": "seven"}',
        "# a comment line",
        "",
        '{"messages": [{"role": "user", "content": "hi"}]}',
        '{"prompt": "x", "scorer": "regex", "pattern": "(\\\\d+)", "reference": "4"}',
    ])
    first, chat, regex = parse_eval_set(text, "set.jsonl")
    assert (first.id, first.scorer, first.reference, first.line) == ("a", "exact", "seven", 1)
    assert chat.id == "line4" and chat.messages[0]["content"] == "hi" and not chat.scored
    assert regex.scorer == "regex" and regex.pattern == "(\\d+)"


def test_every_problem_is_reported_with_its_line():
    text = "\n".join([
        '{"prompt": "ok", "id": "x"}',
        "not json",
        '{"prompt": "p", "messages": [{"role": "user", "content": "c"}]}',
        '{"prompt": "p", "scorer": "fuzzy", "reference": "r"}',
        '{"prompt": "p", "scorer": "number"}',
        '{"prompt": "p", "id": "x"}',
        '{"prompt": "p", "colour": 1}',
        '{"prompt": "p", "scorer": "regex", "pattern": "("}',
        '{"prompt": "p", "max_tokens": 0}',
    ])
    with pytest.raises(UsageError) as info:
        parse_eval_set(text, "set.jsonl")
    message = str(info.value)
    for expected in ("set.jsonl:2: not valid JSON", "set.jsonl:3: needs exactly one of",
                     "set.jsonl:4: unknown scorer 'fuzzy'", "set.jsonl:5: scorer 'number' needs",
                     "set.jsonl:6: id 'x' already used on line 1", "set.jsonl:7: unknown key",
                     "set.jsonl:8: pattern does not compile", "set.jsonl:9: max_tokens must"):
        assert expected in message, expected
    assert "set.jsonl:1" not in message


def test_missing_and_empty_files_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="eval set not found"):
        load_eval_set(tmp_path / "none.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n# only a comment\n")
    with pytest.raises(UsageError, match="no items"):
        load_eval_set(tmp_path / "empty.jsonl")


def test_shipped_example_is_the_generator_output_and_its_references_are_right():
    items = load_eval_set(EXAMPLE)
    assert [json.loads(line) for line in EXAMPLE.read_text().splitlines()] == task_items()
    assert len(items) == 40 and all(item.scored for item in items)
    for item in items:
        words = item.prompt.split()
        if item.id.startswith("plus"):
            truth = NUMBERS[NUMBERS.index(words[0]) + NUMBERS.index(words[2])]
        elif item.id.startswith("minus"):
            truth = NUMBERS[NUMBERS.index(words[0]) - NUMBERS.index(words[2])]
        elif item.id.startswith("count"):
            start = NUMBERS.index(words[2])
            truth = " ".join(NUMBERS[start:start + 5])
        else:
            truth = " ".join(words[1:-1])
        assert item.reference == truth, item.id
        assert score(item, f" {truth} .") is True


def test_the_untaught_class_lies_outside_every_sum_the_corpus_teaches():
    taught = {line.split(" is ")[0] for line in corpus(0, 20000) if " plus " in line}
    items = beyond_items()
    assert beyond_items() == items and len(items) == 10
    for entry in items:
        a_word, _, b_word, _ = entry["prompt"].split()
        a, b = NUMBERS.index(a_word), NUMBERS.index(b_word)
        assert 11 <= a <= 19 and a + b <= 20 and entry["reference"] == NUMBERS[a + b]
        assert entry["prompt"].removesuffix(" is") not in taught
        assert entry["id"].rsplit("-", 1)[0] == "plus-beyond"
