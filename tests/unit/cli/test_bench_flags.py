"""`mopt bench`'s workload flags: each one sets its own workload key (three are named
otherwise), only the flags given are set, and every flag is a parameter of the command."""

from __future__ import annotations

import inspect
from dataclasses import fields
from pathlib import Path

import pytest

from model_optimizer.cli.bench import bench
from model_optimizer.errors import RecipeError
from model_optimizer.recipe import Variation, load_recipe_text
from model_optimizer.usecase.bench import BARE_RECIPE, WorkloadFlags

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
    variations = flags.variations()
    assert [item.key for item in variations] == [
        f"workload.{KEYS.get(name, name)}" for name in EVERY_FLAG]
    assert Variation("workload.ignore_eos", False, "mopt bench --ignore-eos") in variations
    assert Variation("workload.duration_s", 5.0, "mopt bench --duration") in variations
    workload = load_recipe_text(BARE_RECIPE, "<bench flags>", variations).resolved["workload"]
    for name, (_, expected) in EVERY_FLAG.items():
        assert resolved(workload, KEYS.get(name, name)) == expected, name


def test_the_trace_flags_set_the_trace_and_its_speed():
    flags = WorkloadFlags(**{name: given for name, (given, _) in TRACE_FLAGS.items()})
    workload = load_recipe_text(BARE_RECIPE, "<bench flags>",
                                flags.variations()).resolved["workload"]
    for name, (_, expected) in TRACE_FLAGS.items():
        assert resolved(workload, KEYS.get(name, name)) == expected, name


def test_only_the_flags_given_are_set():
    assert WorkloadFlags().variations() == []
    assert [(v.key, v.value) for v in WorkloadFlags(concurrency=4, ignore_eos=True)
            .variations()] == [("workload.concurrency", 4), ("workload.ignore_eos", True)]
    assert [(v.key, v.value) for v in WorkloadFlags(dataset=Path("~/p.jsonl"))
            .variations()] == [("workload.dataset.path",
                                str(Path("~/p.jsonl").expanduser().resolve()))]
    # text flags are typed as --set types them: a rate is a number, 'inf' stays a word
    assert WorkloadFlags(request_rate="2.5").variations()[0].value == 2.5
    assert WorkloadFlags(request_rate="inf").variations()[0].value == "inf"


def test_set_wins_over_a_flag_and_a_bad_flag_names_itself():
    flags = WorkloadFlags(concurrency=4, request_rate="fast")
    loaded = load_recipe_text(BARE_RECIPE, "<bench flags>",
                              [*WorkloadFlags(concurrency=4).variations(),
                               "workload.concurrency=2"])
    assert loaded.resolved["workload"]["concurrency"] == 2
    assert loaded.overrides == ["workload.concurrency=2"]
    with pytest.raises(RecipeError) as info:
        load_recipe_text(BARE_RECIPE, "<bench flags>", flags.variations())
    assert [d.file for d in info.value.diagnostics] == ["mopt bench --request-rate"]


def test_every_flag_is_a_parameter_of_the_command():
    parameters = set(inspect.signature(bench).parameters)
    assert {f.name for f in fields(WorkloadFlags)} <= parameters
    assert parameters - {f.name for f in fields(WorkloadFlags)} == {
        "url", "recipe", "model", "tokenizer", "overrides", "runs_dir_opt", "as_json"}
