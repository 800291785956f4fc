"""A fleet file is loaded like a recipe: every problem at once, located, with its fix."""

from __future__ import annotations

import pytest
import yaml

from model_optimizer.errors import RecipeError
from model_optimizer.fleet import is_fleet_file, load_fleet

from .conftest import ROOT, SHIPPED, cpu_fleet, gpu_fleet


def problems(path) -> list[str]:
    with pytest.raises(RecipeError) as caught:
        load_fleet(path)
    return [d.format() for d in caught.value.diagnostics]


def line_of(path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_the_shipped_fleet_loads_with_its_instances_cores_and_classes():
    fleet = load_fleet(SHIPPED)
    assert list(fleet.instances) == ["short", "long"]
    short, long = fleet.instances["short"], fleet.instances["long"]
    assert (short.cores, long.cores) == ((0,), (1,))
    assert (short.classes, long.classes) == (("short",), ("long",))
    # the member recipe's knobs with the fleet's set, share and placement
    assert short.recipe.spec.engine.max_num_seqs == 16
    assert short.recipe.spec.engine.env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert short.recipe.spec.hardware.placement.engine == (0,)
    assert list(short.recipe.spec.workload.mix) == ["short"]  # planned for its own class
    assert fleet.router.model == "tiny-llama" and fleet.router.fallback == "long"
    assert fleet.front.spec.workload.mix is not None and len(fleet.front.spec.workload.mix) == 2
    assert is_fleet_file(SHIPPED) and not is_fleet_file(ROOT / "recipes" / "tiny-cpu.yaml")


def test_gpu_shares_that_overcommit_the_card_are_refused_at_the_instances(write_fleet):
    path = write_fleet(gpu_fleet(shares=(0.6, 0.5)))
    found = problems(path)
    assert len(found) == 1
    assert f"fleet.yaml:{line_of(path, 'instances:')}:1: instances:" in found[0]
    assert "add up to 1.10 (a 0.6, b 0.5)" in found[0] and "sum to at most 1" in found[0]


def test_cpu_kv_space_over_the_machine_is_refused(write_fleet):
    doc = cpu_fleet()
    doc["instances"]["long"]["kv_cache_gib"] = 4
    found = problems(write_fleet(doc))
    assert any("KV space adds up to 5 GiB (short 1 GiB, long 4 GiB)" in p for p in found)


def test_a_class_routed_nowhere_is_named(write_fleet):
    doc = cpu_fleet()
    doc["router"]["fallback"] = None
    doc["router"]["routes"] = [{"class": "short", "to": "short", "max_prompt_tokens": 256}]
    found = problems(write_fleet(doc))
    assert any("class 'long' is routed nowhere" in p and "router.fallback" in p for p in found)


def test_two_instances_on_one_port_and_two_engines_on_one_core(write_fleet):
    doc = cpu_fleet()
    doc["instances"]["short"]["port"] = 8100
    doc["instances"]["long"]["port"] = 8100
    doc["instances"]["long"]["cores"] = [0]
    path = write_fleet(doc)
    found = problems(path)
    assert any("instances.long.port: port 8100 is also instances.short.port's" in p
               for p in found)
    assert any("instances.long.cores: core 0 is also instance 'short''s" in p for p in found)


@pytest.mark.parametrize(("route", "expected"), [
    ({"class": "long", "to": "short", "max_prompt_tokens": 256},
     "class 'long' prompts are 800 tokens or more, over max_prompt_tokens 256: the rule can "
     "never match"),
    ({"class": "lng", "to": "short", "model": "x"},
     "the workload has no class 'lng': the rule can never match (did you mean 'long'?)"),
    ({"class": "short", "to": "long", "model": "x"},
     "class 'short' is already routed by routes[0]: this rule can never match"),
    ({"class": "long", "to": "short"},
     "nothing tells the router which requests are 'long': the rule can never match"),
    ({"class": "long", "to": "shrt", "model": "x"}, "no instance 'shrt' (did you mean 'short'?)"),
])
def test_a_rule_that_can_never_match_is_refused_where_it_is_written(write_fleet, route,
                                                                      expected):
    doc = cpu_fleet()
    doc["router"]["routes"] = [doc["router"]["routes"][0], route]
    path = write_fleet(doc)
    found = problems(path)
    assert any(expected in p for p in found), found
    assert all(":" in p.split(" ")[0] for p in found)  # file:line:column


def test_tag_and_length_rules_cannot_be_mixed(write_fleet):
    doc = cpu_fleet()
    doc["router"]["routes"][1] = {"class": "long", "to": "long", "tag": "long"}
    found = problems(write_fleet(doc))
    assert any("tag rules and length rules" in p and "by model:" in p for p in found)


def test_a_member_recipe_problem_is_located_in_the_member_file(write_fleet, tmp_path):
    member = yaml.safe_load((ROOT / "recipes" / "tiny-cpu.yaml").read_text())
    member["engine"]["max_num_sqs"] = 8
    (tmp_path / "member.yaml").write_text(yaml.safe_dump(member, sort_keys=False))
    doc = cpu_fleet()
    doc["instances"]["short"] = {"recipe": "member.yaml", "cores": [0], "kv_cache_gib": 1}
    found = problems(write_fleet(doc))
    assert len(found) == 1
    line = line_of(tmp_path / "member.yaml", "max_num_sqs")
    assert found[0].startswith(f"{tmp_path / 'member.yaml'}:{line}:")
    assert "instance 'short': unknown key 'max_num_sqs'" in found[0]
    assert "did you mean 'max_num_seqs'?" in found[0]


def test_a_value_the_fleet_sets_is_located_in_the_fleet(write_fleet):
    doc = cpu_fleet()
    doc["instances"]["short"]["gpu_memory_utilization"] = 0.5
    doc["instances"]["long"]["model"] = {"path": "m", "dtype": "bf16"}
    path = write_fleet(doc)
    found = problems(path)
    assert any(f":{line_of(path, 'gpu_memory_utilization')}:" in p and "this fleet is on cpu"
               in p for p in found)
    assert any(f":{line_of(path, 'dtype: bf16')}:" in p and "instances.long.model.dtype: 'bf16'"
               in p for p in found)


def test_a_recipe_is_not_a_fleet_and_says_so(write_fleet):
    path = write_fleet({"recipe_version": 1, "name": "x", "model": {"path": "m"}})
    assert "not a fleet: a fleet file starts with 'kind: fleet'" in problems(path)[0]
