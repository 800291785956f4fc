"""Request sequences: lazy and bounded, exact lengths per class, datasets measured and sampled."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from model_optimizer.errors import UsageError
from model_optimizer.load.workload import (
    LazyItems,
    WorkItem,
    api_headers,
    dataset_picker,
    prepare_items,
    work_items,
)

pytest.importorskip("transformers")

from model_optimizer.load.prompts import load_tokenizer  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "datasets"


def workload(**overrides) -> dict:
    base = {"endpoint": "completions", "prompt_tokens": 16, "output_tokens": 8,
            "shared_prefix_tokens": 0, "seed": 0, "mix": None, "dataset": None}
    return {**base, **overrides}


class Counter:
    """A build function that records which indices it built, from which thread."""

    def __init__(self):
        self.built: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, index: int) -> WorkItem:
        with self.lock:
            self.built.append(index)
        return WorkItem(f"p{index}", 1)


def test_lazy_items_build_ahead_not_all_upfront():
    build = Counter()
    items = LazyItems(10**8, build, prebuild=16, lookahead=32)
    try:
        assert len(items) == 10**8
        deadline = time.monotonic() + 5
        while len(build.built) < 33 and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        assert sorted(build.built) == list(range(33))  # up to one lookahead past the reader
        assert [items[i].prompt for i in range(200)] == [f"p{i}" for i in range(200)]
        assert max(build.built) <= 200 + 33
    finally:
        items.close()


def test_lazy_items_memory_stays_bounded_and_reread_rebuilds():
    build = Counter()
    items = LazyItems(5000, build, prebuild=8, lookahead=16)
    try:
        for index in range(3000):
            assert items[index].prompt == f"p{index}"
        assert len(items._cache) <= 3 * 16 + 8
        assert items[5].prompt == "p5"  # evicted long ago: built again, same item
        with pytest.raises(IndexError):
            items[5000]
    finally:
        items.close()


def test_fixed_workload_items_match_prompt_source(tiny_model_dir):
    items = work_items(workload(), str(tiny_model_dir), 6)
    tokenizer = load_tokenizer(str(tiny_model_dir))
    assert len(items) == 6 and items.classes == set()
    for item in items:
        assert item.output_tokens == 8 and item.request_class is None
        assert len(tokenizer(item.prompt)["input_ids"]) == 16 == item.prompt_tokens


def test_mix_items_have_their_class_and_exact_lengths(tiny_model_dir):
    mix = {"short": {"weight": 3, "prompt_tokens": {"dist": "uniform", "min": 4, "max": 12},
                     "output_tokens": 4},
           "long": {"weight": 1, "prompt_tokens": 300, "output_tokens": 32}}
    items = work_items(workload(mix=mix, seed=4), str(tiny_model_dir), 40)
    tokenizer = load_tokenizer(str(tiny_model_dir))
    assert items.classes == {"short", "long"}
    seen = {item.request_class for item in items}
    assert seen == {"short", "long"}
    for item in items:
        assert len(tokenizer(item.prompt)["input_ids"]) == item.prompt_tokens
        if item.request_class == "long":
            assert (item.prompt_tokens, item.output_tokens) == (300, 32)
        else:
            assert 4 <= item.prompt_tokens <= 12 and item.output_tokens == 4
    chat = work_items(workload(mix=mix, endpoint="chat"), str(tiny_model_dir), 3)
    assert isinstance(chat[0].prompt, list) and chat[0].prompt[0]["role"] == "user"


def test_dataset_lengths_are_measured_in_the_model_tokenizer(tiny_model_dir):
    spec = {"path": str(EXAMPLES / "sharegpt.json")}
    items = work_items(workload(dataset=spec, output_tokens=7), str(tiny_model_dir), 4)
    tokenizer = load_tokenizer(str(tiny_model_dir))
    by_prompt = {item.prompt: item for item in items}
    hello = by_prompt["Say hello."]
    assert hello.output_tokens == 7  # no reply in the file: the workload's value
    assert hello.prompt_tokens == len(tokenizer("Say hello.")["input_ids"])
    reverse = by_prompt["How do I reverse a list in Python?"]
    reply = ("Use reversed(my_list) for an iterator, or my_list[::-1] for a reversed copy, "
             "or my_list.reverse() to reverse it in place.")
    assert reverse.output_tokens == len(tokenizer(reply, add_special_tokens=False)["input_ids"])


def test_dataset_sampling_with_and_without_replacement():
    pool = [WorkItem(str(i), 1) for i in range(5)]
    without = dataset_picker(pool, {}, seed=1)
    first_pass = [without(i).prompt for i in range(5)]
    assert sorted(first_pass) == ["0", "1", "2", "3", "4"]
    assert sorted(without(i).prompt for i in range(5, 10)) == sorted(first_pass)
    assert [dataset_picker(pool, {}, seed=1)(i).prompt for i in range(5)] == first_pass
    with_ = dataset_picker(pool, {"sampling": "with_replacement"}, seed=1)
    draws = [with_(i).prompt for i in range(40)]
    assert len(set(draws)) == 5 and len(draws) == 40
    assert any(draws[i] == draws[i + 1] for i in range(39)) or len(set(draws[:5])) < 5


def test_chat_entry_needs_the_chat_endpoint(tiny_model_dir):
    spec = {"path": str(EXAMPLES / "prompts.jsonl")}
    with pytest.raises(UsageError, match=r"prompts.jsonl:5: a chat \('messages'\) entry"):
        work_items(workload(dataset=spec), str(tiny_model_dir), 4)
    items = work_items(workload(dataset=spec, endpoint="chat"), str(tiny_model_dir), 6)
    assert items.classes == {"short", "long"}


def test_prompt_longer_than_max_model_len_names_its_line(tiny_model_dir, tmp_path):
    path = tmp_path / "long.jsonl"
    path.write_text('{"prompt": "short one", "output_tokens": 4}\n'
                    + '{"prompt": "%s", "output_tokens": 4}\n' % ("word " * 300))
    spec = {"path": str(path)}
    with pytest.raises(UsageError) as caught:
        work_items(workload(dataset=spec), str(tiny_model_dir), 4, max_model_len=128)
    text = str(caught.value)
    assert f"{path}:2: the prompt alone" in text
    assert "does not fit engine.max_model_len 128" in text
    assert len(work_items(workload(dataset=spec), str(tiny_model_dir), 4,
                          max_model_len=2048)) == 4


def test_missing_class_in_dataset_is_a_usage_error(tiny_model_dir):
    spec = {"path": str(EXAMPLES / "prompts.csv")}
    with pytest.raises(UsageError, match="slo.classes names interactive, but no request"):
        prepare_items(workload(dataset=spec), str(tiny_model_dir), 4,
                      max_model_len=None, classes={"interactive": {"ttft_p99_ms": 100}})


def test_api_key_comes_from_the_named_variable(monkeypatch):
    assert api_headers({}) == {}
    monkeypatch.setenv("MOPT_TEST_KEY", "s3cret")
    assert api_headers({"api_key_env": "MOPT_TEST_KEY"}) == {"Authorization": "Bearer s3cret"}
    monkeypatch.delenv("MOPT_TEST_KEY")
    with pytest.raises(UsageError, match="MOPT_TEST_KEY, which is not set"):
        api_headers({"api_key_env": "MOPT_TEST_KEY"})
