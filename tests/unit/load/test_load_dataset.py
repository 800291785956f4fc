"""Prompt files: every format, and bad input located as file:line with exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from model_optimizer.errors import EXIT_USAGE, UsageError
from model_optimizer.load.dataset import detect_format, read_dataset

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "datasets"
BAD = ROOT / "tests" / "data" / "datasets"


def test_jsonl_example_reads_prompts_chats_lengths_and_classes():
    entries = read_dataset(EXAMPLES / "prompts.jsonl")
    assert len(entries) == 6
    first = entries[0]
    assert first.line == 1
    assert first.prompt.startswith("Summarize the plot")
    assert (first.output_tokens, first.request_class) == (48, "short")
    chat = entries[4]
    assert chat.prompt is None and chat.messages[0] == {
        "role": "system", "content": "You are a terse assistant."}
    assert [e.request_class for e in entries].count("long") == 1


def test_csv_example_reads_rows_with_their_line_numbers():
    entries = read_dataset(EXAMPLES / "prompts.csv")
    assert [e.line for e in entries] == [2, 3, 4, 5]
    assert entries[0].prompt == "Name the capital of Australia."
    assert entries[1].prompt == "Explain, in one paragraph, why the sky is blue."  # quoted comma
    assert [e.output_tokens for e in entries] == [16, 64, 40, 200]
    assert entries[3].request_class == "long"


def test_sharegpt_example_takes_first_human_turn_and_reply():
    entries = read_dataset(EXAMPLES / "sharegpt.json")
    assert [e.prompt for e in entries] == [
        "How do I reverse a list in Python?", "Give me a recipe for pancakes.",
        "What does HTTP 429 mean?", "Say hello."]
    assert entries[0].output_text.startswith("Use reversed(my_list)")
    assert entries[3].output_text is None  # no reply: the workload's output_tokens apply
    assert [e.line for e in entries] == [2, 5, 9, 12]


def test_max_tokens_is_output_tokens_and_ids_are_allowed(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"id": 7, "prompt": "a", "max_tokens": 5}\n'
                    '{"prompt": "b", "max_tokens": 5, "output_tokens": 5}\n')
    assert [e.output_tokens for e in read_dataset(path)] == [5, 5]


@pytest.mark.parametrize(("name", "where", "words"), [
    ("malformed.jsonl", ":2:", "not valid JSON"),
    ("empty.jsonl", "empty.jsonl:", "holds no prompts"),
    ("blank.jsonl", "blank.jsonl:", "holds no prompts"),
    ("unknown_key.jsonl", ":2:", "did you mean 'prompt'"),
    ("no_prompt.jsonl", ":1:", "needs exactly one of 'prompt'"),
    ("bad_class.jsonl", ":1:", "'class' must be a name"),
    ("bad_output.jsonl", ":1:", "'output_tokens' must be a whole number of at least 1"),
    ("bad_column.csv", ":1:", "unknown column 'tokens'"),
    ("extra_field.csv", ":3:", "more fields than the header"),
    ("bad_number.csv", ":3:", "'output_tokens' must be a whole number"),
    ("malformed_sharegpt.json", ":3:", "not valid JSON"),
    ("no_conversations.json", ":3:", "needs a 'conversations' list"),
    ("not_array.json", ":1:", "JSON array"),
])
def test_bad_files_name_file_line_and_exit_2(name, where, words):
    with pytest.raises(UsageError) as caught:
        read_dataset(BAD / name)
    message = str(caught.value)
    assert message.startswith(str(BAD / name))
    assert where in message and words in message
    assert caught.value.exit_code == EXIT_USAGE


def test_missing_file_and_unknown_extension(tmp_path):
    with pytest.raises(UsageError, match="dataset file not found"):
        read_dataset(tmp_path / "nope.jsonl")
    odd = tmp_path / "prompts.txt"
    odd.write_text("hello\n")
    with pytest.raises(UsageError, match="cannot tell the dataset format"):
        read_dataset(odd)
    assert detect_format(odd, "jsonl") == "jsonl"
    with pytest.raises(UsageError, match="unknown dataset format"):
        detect_format(odd, "parquet")


def test_invalid_utf8_names_its_line(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(b'{"prompt": "ok"}\n{"prompt": "caf\xe9"}\n')
    with pytest.raises(UsageError, match=r"latin1.jsonl:2: not valid UTF-8"):
        read_dataset(path)


def test_chat_turns_need_role_and_content(tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text('{"messages": [{"role": "user"}]}\n')
    with pytest.raises(UsageError, match=r"chat.jsonl:1: every message needs"):
        read_dataset(path)
