"""Prompts of exact token length with the tiny model's own tokenizer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from model_optimizer.load.prompts import PromptSource, load_tokenizer  # noqa: E402

LENGTHS = [(1, 0), (2, 1), (17, 5), (128, 64), (512, 0), (300, 300)]


@pytest.fixture(scope="module")
def bos_tokenizer_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The tiny tokenizer changed to add a BOS token, like Llama's (vLLM then counts it)."""
    folder = tmp_path_factory.mktemp("bos-tokenizer")
    for path in Path(tiny_model_dir).iterdir():
        if path.name.startswith("tokenizer") or path.name.endswith(".jinja"):
            shutil.copy(path, folder / path.name)
    spec = json.loads((folder / "tokenizer.json").read_text())
    bos = {"SpecialToken": {"id": "<s>", "type_id": 0}}
    spec["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}},
                 {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}},
    }
    (folder / "tokenizer.json").write_text(json.dumps(spec))
    return str(folder)


def server_ids(tokenizer_dir: str, prompt: str) -> list[int]:
    """What vLLM's /v1/completions tokenizes: the prompt with the tokenizer's special tokens."""
    return load_tokenizer(tokenizer_dir)(prompt, add_special_tokens=True)["input_ids"]


@pytest.mark.parametrize(("prompt_tokens", "shared_prefix_tokens"), LENGTHS)
def test_exact_length_and_shared_prefix(tiny_model_dir, prompt_tokens, shared_prefix_tokens):
    source = PromptSource(str(tiny_model_dir), prompt_tokens, shared_prefix_tokens, seed=3)
    prompts = source.make(12)
    ids = [server_ids(str(tiny_model_dir), prompt) for prompt in prompts]
    assert source.expected_server_prompt_tokens == prompt_tokens
    assert {len(token_ids) for token_ids in ids} == {prompt_tokens}
    assert len({tuple(token_ids[:shared_prefix_tokens]) for token_ids in ids}) == 1
    if prompt_tokens - shared_prefix_tokens >= 4:
        assert len(set(prompts)) == len(prompts)
        suffixes = {tuple(token_ids[shared_prefix_tokens:][:4]) for token_ids in ids}
        assert len(suffixes) > 1


def test_no_special_tokens_inside_prompts(tiny_model_dir):
    tokenizer = load_tokenizer(str(tiny_model_dir))
    special = set(tokenizer.all_special_ids)
    for prompt in PromptSource(str(tiny_model_dir), 64, seed=1).make(20):
        assert not special & set(server_ids(str(tiny_model_dir), prompt))
        assert prompt.isprintable()


def test_deterministic_for_a_seed(tiny_model_dir):
    first = PromptSource(str(tiny_model_dir), 40, 10, seed=5)
    second = PromptSource(str(tiny_model_dir), 40, 10, seed=5)
    assert first.make(8) == second.make(8)
    assert first.make(8)[:3] == first.make(3)
    assert PromptSource(str(tiny_model_dir), 40, 10, seed=6).make(8) != first.make(8)


def test_chat_messages_render_to_exact_length(tiny_model_dir):
    source = PromptSource(str(tiny_model_dir), 100, 30, seed=2)
    chats = source.chat_messages(10)
    assert source.expected_chat_prompt_tokens == 100
    assert {source.chat_prompt_tokens(messages) for messages in chats} == {100}
    assert all(len(messages) == 1 and messages[0]["role"] == "user" for messages in chats)
    tokenizer = load_tokenizer(str(tiny_model_dir))
    content_ids = [tokenizer(messages[0]["content"], add_special_tokens=False)["input_ids"]
                   for messages in chats]
    assert len({tuple(token_ids[:30]) for token_ids in content_ids}) == 1
    assert len({tuple(token_ids[30:]) for token_ids in content_ids}) == 10
    assert source.chat_messages(3) == chats[:3]


def test_chat_too_short_for_template(tiny_model_dir):
    with pytest.raises(ValueError, match="chat template alone"):
        PromptSource(str(tiny_model_dir), 2).chat_messages(1)


def test_bos_adding_tokenizer_counts_bos(bos_tokenizer_dir):
    source = PromptSource(bos_tokenizer_dir, 32, 8, seed=0)
    prompts = source.make(10)
    ids = [server_ids(bos_tokenizer_dir, prompt) for prompt in prompts]
    assert source.expected_server_prompt_tokens == 32
    assert {len(token_ids) for token_ids in ids} == {32}
    assert all(token_ids[0] == 0 for token_ids in ids)
    assert len({tuple(token_ids[:8]) for token_ids in ids}) == 1
    assert {source.server_prompt_tokens(prompt) for prompt in prompts} == {32}


def test_bos_leaves_one_token_minimum(bos_tokenizer_dir):
    source = PromptSource(bos_tokenizer_dir, 1)
    assert source.expected_server_prompt_tokens == 2
    assert {len(server_ids(bos_tokenizer_dir, p)) for p in source.make(3)} == {2}


def test_invalid_lengths_rejected(tiny_model_dir):
    with pytest.raises(ValueError, match="prompt_tokens"):
        PromptSource(str(tiny_model_dir), 0)
    with pytest.raises(ValueError, match="shared_prefix_tokens"):
        PromptSource(str(tiny_model_dir), 8, 9)
