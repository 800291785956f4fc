"""`mopt bench`'s workload flags: each one sets its own workload key (three are named
otherwise), only the flags given are set, and every flag is a parameter of the command."""

from __future__ import annotations

import inspect
from dataclasses import fields
from pathlib import Path

from model_optimizer.cli.bench import _BARE_RECIPE, WorkloadFlags, bench
from model_optimizer.recipe import load_recipe_text

ROOT = Path(__file__).resolve().parents[3]
DATASET = ROOT / "recipes" / "tiny-cpu.yaml"
#: every flag given, and the resolved workload value its override must leave
EVERY_FLAG = {"prompt_tokens": (64, 64), "output_tokens": (8, 8), "concurrency": (2, 2),
              "num_requests": (10, 10), "duration_s": (5.0, 5.0),
              "request_rate": ("2.5", 2.5), "warmup": (3, 3), "shared_prefix": (16, 16),
              "seed": (7, 7), "endpoint": ("chat", "chat"), "dataset": (DATASET, str(DATASET)),
              "api_key_env": ("MY_KEY", "MY_KEY"), "ignore_eos": (False, False)}
KEYS = {"warmup": "warmup_requests", "shared_prefix": "shared_prefix_tokens",
        "dataset": "dataset.path", "speed": "trace_speed"}
TRACE = ROOT / "examples" / "traces" / "sessions.jsonl"
#: the trace's flags: a trace excludes a dataset, so they are given on their own
TRACE_FLAGS = {"trace": (TRACE, str(TRACE)), "speed": ("2x", "2x")}


def resolved(workload: dict, key: str) -> object:
    for part in key.split("."):
        workload = workload[part]
    return workload


def test_every_flag_sets_its_workload_key():
    assert set(EVERY_FLAG) | set(TRACE_FLAGS) == {f.name for f in fields(WorkloadFlags)}
    flags = WorkloadFlags(**{name: given for name, (given, _) in EVERY_FLAG.items()})
    overrides = flags.overrides()
    assert [item.split("=", 1)[0] for item in overrides] == [
        f"workload.{KEYS.get(name, name)}" for name in EVERY_FLAG]
    assert "workload.ignore_eos=false" in overrides
    workload = load_recipe_text(_BARE_RECIPE, "<bench flags>", overrides).resolved["workload"]
    for name, (_, expected) in EVERY_FLAG.items():
        assert resolved(workload, KEYS.get(name, name)) == expected, name


def test_the_trace_flags_set_the_trace_and_its_speed():
    flags = WorkloadFlags(**{name: given for name, (given, _) in TRACE_FLAGS.items()})
    workload = load_recipe_text(_BARE_RECIPE, "<bench flags>",
                                flags.overrides()).resolved["workload"]
    for name, (_, expected) in TRACE_FLAGS.items():
        assert resolved(workload, KEYS.get(name, name)) == expected, name


def test_only_the_flags_given_are_set():
    assert WorkloadFlags().overrides() == []
    assert WorkloadFlags(concurrency=4, ignore_eos=True).overrides() == [
        "workload.concurrency=4", "workload.ignore_eos=true"]
    assert WorkloadFlags(dataset=Path("~/p.jsonl")).overrides() == [
        f"workload.dataset.path={Path('~/p.jsonl').expanduser().resolve()}"]


def test_every_flag_is_a_parameter_of_the_command():
    parameters = set(inspect.signature(bench).parameters)
    assert {f.name for f in fields(WorkloadFlags)} <= parameters
    assert parameters - {f.name for f in fields(WorkloadFlags)} == {
        "url", "recipe", "model", "tokenizer", "overrides", "runs_dir_opt", "as_json"}
