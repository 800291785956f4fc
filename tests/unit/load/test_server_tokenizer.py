"""The server's own tokenizer (``/tokenize``, ``/detokenize``) behind PromptSource, on the mock."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from model_optimizer.errors import UsageError
from model_optimizer.load import server_tokenizer
from model_optimizer.load.mock_answer import count_prompt_tokens
from model_optimizer.load.mock_server import MockServer
from model_optimizer.load.prompts import PromptSource, register_tokenizer
from model_optimizer.load.server_tokenizer import (
    ServerTokenizer,
    TokenizeBudgetSpent,
    TokenizeError,
)
from model_optimizer.load.workload import work_items


def source_on(server: MockServer, prompt_tokens: int = 1, prefix: int = 0) -> PromptSource:
    tokenizer = ServerTokenizer(server.url, server.config.model)
    return PromptSource(register_tokenizer(tokenizer.location, tokenizer), prompt_tokens,
                        prefix, seed=3)


@pytest.mark.parametrize("vocab_size", [5, 300, 512, 1000])
def test_vocab_size_is_found_by_searching_detokenize(vocab_size):
    with MockServer(vocab_size=vocab_size) as server:
        tokenizer = ServerTokenizer(server.url)
        assert len(tokenizer) == vocab_size
        assert server.counters.tokenize_calls <= 2 + 2 * 12  # a bisection, not a scan


def test_encode_decode_and_the_added_bos_are_the_servers():
    with MockServer(bos_token=True) as server:
        tokenizer = ServerTokenizer(server.url, "mock-model")
        assert tokenizer("w7 w9", add_special_tokens=False)["input_ids"] == [7, 9]
        assert tokenizer("w7 w9", add_special_tokens=True)["input_ids"] == [0, 7, 9]
        assert tokenizer.decode([7, 9]) == "w7 w9"
        assert tokenizer.all_special_ids == [0]  # learnt from the BOS the server adds
        assert tokenizer.encode_chat([{"role": "user", "content": "w4 w5 w6"}]) == [4, 5, 6]


@pytest.mark.parametrize("bos", [False, True])
def test_prompts_have_the_exact_length_the_server_counts(bos):
    with MockServer(bos_token=bos) as server:
        source = source_on(server, prompt_tokens=24, prefix=6)
        assert source.expected_server_prompt_tokens == 24
        prompts = source.make(5)
        for prompt in prompts:  # the mock's usage count (words, + <s>) is the target
            assert count_prompt_tokens({"prompt": prompt}) + bos == 24
            assert "<s>" not in prompt and "<unk>" not in prompt  # markup avoided
        heads = {tuple(p.split()[:6 - bos]) for p in prompts}
        assert len(heads) == 1  # the shared prefix, BOS included in its count
        source = source_on(server, prompt_tokens=24)
        for length in (1 + bos, 7, 300):
            prompt = source.completion_prompt(9, length)
            assert count_prompt_tokens({"prompt": prompt}) + bos == length
            assert source.server_prompt_tokens(prompt) == length
        chat = source.chat_prompt(2, 11)
        assert count_prompt_tokens({"messages": chat}) == source.chat_prompt_tokens(chat) == 11
        assert {0, 1, 2} <= source._special_ids


def test_prompts_are_deterministic_and_answers_cached():
    with MockServer() as server:
        first = source_on(server, prompt_tokens=16).make(4)
        tokenizer = ServerTokenizer(server.url)
        location = register_tokenizer(tokenizer.location, tokenizer)
        assert PromptSource(location, 16, 0, seed=3).make(4) == first  # a fresh cache
        calls = server.counters.tokenize_calls
        assert PromptSource(location, 16, 0, seed=3).make(4) == first
        assert server.counters.tokenize_calls == calls  # every answer came from the cache


def test_a_dataset_is_measured_by_the_server(tmp_path):
    data = tmp_path / "p.jsonl"
    data.write_text('{"prompt": "w5 w6 w7 w8"}\n{"prompt": "hello there", "class": "x"}\n')
    with MockServer(bos_token=True) as server:
        tokenizer = ServerTokenizer(server.url)
        location = register_tokenizer(tokenizer.location, tokenizer)
        workload = {"dataset": {"path": str(data)}, "output_tokens": 4, "seed": 0}
        items = work_items(workload, location, 2)
        assert sorted(item.prompt_tokens for item in items) == [3, 5]  # words + <s>
        items.close()


def test_a_server_without_the_endpoint_names_the_flag_to_pass():
    with MockServer(tokenize_endpoint=False) as server, \
            pytest.raises(UsageError, match="no tokenize endpoint.*--tokenizer DIR"):
        ServerTokenizer(server.url)


def test_the_api_key_goes_with_every_tokenize_call():
    with MockServer(api_key="sk-test") as server:
        with pytest.raises(UsageError, match="HTTP 401.*--api-key-env"):
            ServerTokenizer(server.url)
        tokenizer = ServerTokenizer(server.url, headers={"Authorization": "Bearer sk-test"})
        assert len(tokenizer) == 512 and tokenizer.decode([3]) == "w3"


def test_an_answer_without_tokens_is_a_clear_error():
    with MockServer() as server:
        tokenizer = ServerTokenizer(server.url)
        with pytest.raises(TokenizeError, match="could not tokenize token ids: HTTP 400"):
            tokenizer.decode([10**6])
        with pytest.raises(UsageError, match="does not exist"):
            ServerTokenizer(server.url, "other-model")


def test_a_server_that_never_answers_is_bounded():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    accepted = []
    threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
    started = time.monotonic()
    try:
        with pytest.raises(UsageError, match="did not answer.*--tokenizer DIR"):
            ServerTokenizer(f"http://127.0.0.1:{listener.getsockname()[1]}", timeout_s=0.5)
    finally:
        listener.close()
    assert time.monotonic() - started < 5


# ----- issue 37: all the calls together are bounded ----------------------------------------


@pytest.mark.parametrize(("bound", "value", "shown"), [("MAX_CALLS", 300, "300 calls"),
                                                       ("BUDGET_S", 0.4, "0.4 s")])
def test_an_inconsistent_tokenizer_ends_at_the_bound_with_a_clear_error(monkeypatch, bound,
                                                                         value, shown):
    monkeypatch.setattr(server_tokenizer, bound, value)
    with MockServer(hostile="tokenize_mismatch") as server:
        started = time.monotonic()
        with pytest.raises(TokenizeBudgetSpent, match="pass --tokenizer DIR") as caught:
            source_on(server, prompt_tokens=8)
        calls = server.counters.tokenize_calls
    assert f"over the bound ({server_tokenizer.MAX_CALLS} calls, " in str(caught.value)
    assert shown in str(caught.value)
    assert time.monotonic() - started < 5
    assert calls <= server_tokenizer.MAX_CALLS + 1  # a fault answers 4096 ids: 8,000 calls


def test_a_call_never_waits_past_what_is_left_of_the_budget(monkeypatch):
    monkeypatch.setattr(server_tokenizer, "BUDGET_S", 1.0)
    with MockServer() as server:
        tokenizer = ServerTokenizer(server.url, timeout_s=5.0)
        tokenizer.waited_s = 0.75
        seen = []
        real_call = server_tokenizer.httpcall.call
        monkeypatch.setattr(server_tokenizer.httpcall, "call", lambda *a, **k: seen.append(
            k["deadline_s"]) or real_call(*a, **k))
        tokenizer.decode([5])
    assert seen and seen[0] <= 0.25
