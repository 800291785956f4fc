"""`mopt split`'s single server: the rule that derives it from the fleet, a declared recipe,
and the input refused (exit 2) before anything starts."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.errors import RecipeError, UsageError
from model_optimizer.fleet import load_fleet
from model_optimizer.fleet.single import single_server
from tests.unit.mock_engine import alive, children_pids

from .conftest import SHIPPED, cpu_fleet

RECIPE = """\
recipe_version: 1
name: one
model: {{path: m, served_name: one}}
engine:
  block_size: 32
  max_model_len: {max_model_len}
  max_num_seqs: 12
  enforce_eager: true
{env}hardware: {{accelerator: cpu, memory_gib: 4}}
"""


def uneven_fleet(write_fleet):
    """Short: 16 sequences of 1024 tokens, long: 4 of 2048."""
    doc = cpu_fleet()
    doc["instances"]["short"]["engine"].update(max_num_seqs=16, max_model_len=1024)
    return load_fleet(write_fleet(doc))


def test_the_default_is_the_first_instance_given_the_whole_machine(write_fleet):
    fleet = uneven_fleet(write_fleet)
    single = single_server(fleet)
    resolved = single.resolved
    assert single.name == "f.single"
    assert resolved["model"]["path"] == "m"  # short's model, as the fleet serves it
    assert resolved["hardware"]["placement"] == {"engine": [0, 1]}  # every engine core
    assert resolved["engine"]["env"]["VLLM_CPU_KVCACHE_SPACE"] == "2"  # 1 + 1 GiB
    assert resolved["engine"]["max_num_seqs"] == 20  # 16 + 4
    assert resolved["engine"]["max_model_len"] == 2048  # long's: it serves every class
    assert resolved["engine"]["port"] == 0
    assert resolved["model"]["served_name"] == "m"  # what clients ask the router for
    assert set(resolved["workload"]["mix"]) == {"short", "long"}  # the whole workload
    assert "single server" in single.source_text and "max_num_seqs: 20" in single.source_text


def test_a_member_recipe_first_instance_gets_the_rule_through_its_overrides():
    fleet = load_fleet(SHIPPED)
    single = single_server(fleet)
    engine = single.resolved["engine"]
    assert engine["max_num_seqs"] == 20  # 16 (short's set:) + 4 (long)
    assert engine["max_model_len"] == 2048  # tiny-cpu.yaml says 512; long needs 2048
    assert engine["env"]["VLLM_CPU_KVCACHE_SPACE"] == "2"
    assert single.resolved["model"]["served_name"] == "tiny-llama"
    assert single.path == SHIPPED.parent / "tiny-cpu.yaml"


@pytest.mark.parametrize(("env", "kv"), [("", "2"), (
    "  env: {VLLM_CPU_KVCACHE_SPACE: '3'}\n", "3")])
def test_a_declared_recipe_keeps_its_engine_and_its_own_share(write_fleet, tmp_path, env, kv):
    fleet = uneven_fleet(write_fleet)
    path = tmp_path / "one.yaml"
    path.write_text(RECIPE.format(max_model_len=2048, env=env))
    single = single_server(fleet, path)
    assert single.resolved["engine"]["max_num_seqs"] == 12  # as written
    assert single.resolved["engine"]["env"]["VLLM_CPU_KVCACHE_SPACE"] == kv
    assert single.resolved["hardware"]["placement"] == {"engine": [0, 1]}
    assert single.resolved["model"]["served_name"] == "m"
    assert set(single.resolved["workload"]["mix"]) == {"short", "long"}


def test_a_declared_recipe_the_checks_refuse_is_located_in_its_file(write_fleet, tmp_path):
    fleet = uneven_fleet(write_fleet)
    path = tmp_path / "one.yaml"
    path.write_text(RECIPE.format(max_model_len=512, env=""))
    with pytest.raises(RecipeError) as caught:
        single_server(fleet, path)
    problem = next(d for d in caught.value.diagnostics if d.path == "engine.max_model_len")
    assert (problem.file, problem.line) == (str(path), 6)
    assert problem.message.startswith(f"--single {path}: ")
    assert "1232" in problem.message  # the long class's longest request


def test_a_derived_single_server_the_checks_refuse_names_the_rule(write_fleet):
    doc = cpu_fleet()
    doc["instances"]["short"]["engine"].update(max_num_seqs=16, max_num_batched_tokens=16)
    path = write_fleet(doc)
    fleet = load_fleet(path)  # each instance is fine: 16 tokens for 16 sequences
    with pytest.raises(RecipeError) as caught:
        single_server(fleet)  # 16 + 4 sequences, still 16 tokens a step
    problem = next(d for d in caught.value.diagnostics
                   if d.path == "instances.short.engine.max_num_batched_tokens")
    assert problem.file == str(path)
    lines = path.read_text().splitlines()
    assert "max_num_batched_tokens: 16" in lines[problem.line - 1]
    assert problem.message.startswith("the single server (instance 'short' given the whole "
                                      "machine): ")
    assert "smaller than max_num_seqs (20)" in problem.message


def test_a_fleet_of_one_instance_has_nothing_to_split(write_fleet):
    doc = cpu_fleet()
    del doc["instances"]["long"]
    doc["router"] = {"model": "m", "fallback": "short", "routes": [
        {"class": "short", "to": "short"}, {"class": "long", "to": "short"}]}
    doc["instances"]["short"]["engine"]["max_model_len"] = 2048
    fleet = load_fleet(write_fleet(doc))
    with pytest.raises(UsageError, match="a fleet of one instance is one server"):
        single_server(fleet)


def invoke(*args: str):
    return CliRunner().invoke(app, ["split", *args], env={"COLUMNS": "200"})


def test_bad_input_exits_2_before_anything_starts(write_fleet, tmp_path):
    before = children_pids()
    fleet = write_fleet(cpu_fleet())
    missing = invoke(str(fleet), "--single", str(tmp_path / "nope.yaml"),
                     "--runs-dir", str(tmp_path / "runs"))
    assert missing.exit_code == 2, missing.output
    assert "no such recipe file" in missing.output
    as_fleet = invoke(str(fleet), "--single", str(fleet), "--runs-dir", str(tmp_path / "runs"))
    assert as_fleet.exit_code == 2 and "that is a fleet file" in as_fleet.output
    one = cpu_fleet()
    del one["instances"]["long"]
    one["router"] = {"model": "m", "fallback": "short", "routes": [
        {"class": "short", "to": "short"}, {"class": "long", "to": "short"}]}
    one["instances"]["short"]["engine"]["max_model_len"] = 2048
    lonely = invoke(str(write_fleet(one, "one.yaml")), "--runs-dir", str(tmp_path / "runs"))
    assert lonely.exit_code == 2 and "nothing to split" in lonely.output
    few = invoke(str(fleet), "--rounds", "1", "--runs-dir", str(tmp_path / "runs"))
    assert few.exit_code == 2
    both = invoke(str(fleet), "--sweep-instances", "--replicas", "--runs-dir",
                  str(tmp_path / "runs"))
    assert both.exit_code == 2 and "--replicas is an arm of the rounds" in both.output
    assert not (tmp_path / "runs").exists()  # nothing archived, nothing started
    assert not alive(children_pids() - before)
