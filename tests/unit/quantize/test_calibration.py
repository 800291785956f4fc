"""Calibration samples: the user's prompts (seeded sample) or the built-in text."""

from __future__ import annotations

import json

import pytest

from model_optimizer.errors import UsageError
from model_optimizer.quantize.calibration import builtin_passages, calibration_texts


def _settings(**extra):
    return {"file": None, "num_samples": 8, "max_seq_length": 64, "seed": 0, **extra}


def test_builtin_text_gives_the_count_asked_deterministically():
    first = calibration_texts(_settings(), None)
    assert len(first.texts) == 8 and first.source.startswith("built-in")
    assert first.texts == builtin_passages(8)
    assert len(set(first.texts)) == 8


def test_prompt_file_is_sampled_with_the_seed(tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps({"prompt": f"prompt {i}"}) + "\n" for i in range(50)))
    one = calibration_texts(_settings(file="p.jsonl"), tmp_path)
    again = calibration_texts(_settings(file="p.jsonl"), tmp_path)
    other = calibration_texts(_settings(file="p.jsonl", seed=1), tmp_path)
    assert len(one.texts) == 8 and one.texts == again.texts and one.texts != other.texts
    assert all(text.startswith("prompt ") for text in one.texts)
    few = calibration_texts(_settings(file=str(prompts), num_samples=100), None)
    assert len(few.texts) == 50


def test_empty_or_bad_prompt_files_are_usage_errors(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n# nothing\n")
    with pytest.raises(UsageError, match="no non-empty prompts"):
        calibration_texts(_settings(file="empty.jsonl"), tmp_path)
    with pytest.raises(UsageError, match="cannot read"):
        calibration_texts(_settings(file="missing.jsonl"), tmp_path)
