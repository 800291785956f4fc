"""`mopt split --replicas`: the replicas derived from the single server (cores, shares,
max_num_seqs), their router (one balanced group, no class rule), and how their routing is
checked (counts that add up, every replica used)."""

from __future__ import annotations

import pytest

from model_optimizer.errors import RecipeError
from model_optimizer.fleet import load_fleet
from model_optimizer.fleet.counts import Routed, instance_figures, routing_problems, settled
from model_optimizer.fleet.replicas import STRATEGY, replica_seqs, replicas_fleet
from model_optimizer.fleet.router import Endpoint, expected_instance, request_label, router_config
from model_optimizer.fleet.single import single_server
from model_optimizer.fleet.spec import ANY_INSTANCE
from model_optimizer.load.stream import RequestRecord

from .conftest import SHIPPED, cpu_fleet, gpu_fleet
from .test_split_single import RECIPE


def test_each_replica_is_the_single_server_on_an_instances_cores_and_share():
    fleet = load_fleet(SHIPPED)
    single = single_server(fleet)  # short given the whole machine: 16 + 4 sequences
    replicas = replicas_fleet(fleet, single)
    assert list(replicas.instances) == ["replica-1", "replica-2"]
    for (name, replica), cores in zip(replicas.instances.items(), ([0], [1]), strict=True):
        engine = replica.recipe.resolved["engine"]
        assert replica.recipe.name == f"tiny-cpu-fleet.{name}"
        assert replica.recipe.resolved["hardware"]["placement"] == {"engine": cores}
        assert list(replica.cores) == cores
        assert engine["env"]["VLLM_CPU_KVCACHE_SPACE"] == "1"  # the instance's, not the sum
        assert engine["max_num_seqs"] == 10  # 20 / 2
        assert engine["max_model_len"] == 2048  # the single server's: every class
        assert replica.recipe.resolved["model"] == single.resolved["model"]
        assert replica.served_name == "tiny-llama" and replica.classes == ("short", "long")
    assert replicas.name == "tiny-cpu-fleet-replicas"
    assert replicas.front is fleet.front  # the same workload and SLOs as the fleet arm
    assert (replicas.router.model, replicas.router.routes, replicas.router.balance) == (
        "tiny-llama", (), STRATEGY)
    assert "from_instance: long" in replicas.source_text


def test_max_num_seqs_is_the_single_servers_divided_and_rounded_up(write_fleet):
    assert [replica_seqs(n, 2) for n in (None, 1, 7, 8, 20)] == [1, 1, 4, 4, 10]
    assert replica_seqs(8, 3) == 3
    doc = cpu_fleet()
    doc["instances"]["long"]["engine"]["max_num_seqs"] = 3  # 4 + 3 = 7 in the single server
    fleet = load_fleet(write_fleet(doc))
    replicas = replicas_fleet(fleet, single_server(fleet))
    assert [r.recipe.spec.engine.max_num_seqs for r in replicas.instances.values()] == [4, 4]


def test_on_a_gpu_each_replica_takes_its_instances_memory_share(write_fleet):
    fleet = load_fleet(write_fleet(gpu_fleet(shares=(0.3, 0.6), seqs=8)))
    single = single_server(fleet)
    assert single.spec.engine.gpu_memory_utilization == pytest.approx(0.9)
    replicas = replicas_fleet(fleet, single)
    assert [(r.recipe.spec.engine.gpu_memory_utilization, r.recipe.spec.engine.max_num_seqs,
             r.cores) for r in replicas.instances.values()] == [(0.3, 8, None), (0.6, 8, None)]


def test_a_declared_single_server_is_replicated_with_the_instances_shares(write_fleet,
                                                                          tmp_path):
    fleet = load_fleet(write_fleet(cpu_fleet()))
    path = tmp_path / "one.yaml"
    path.write_text(RECIPE.format(max_model_len=2048,
                                  env="  env: {VLLM_CPU_KVCACHE_SPACE: '3'}\n"))
    single = single_server(fleet, path)  # its own 3 GiB, 12 sequences
    replicas = replicas_fleet(fleet, single, path)
    assert [(r.recipe.spec.engine.env["VLLM_CPU_KVCACHE_SPACE"],
             r.recipe.spec.engine.max_num_seqs) for r in replicas.instances.values()] == [
        ("1", 6), ("1", 6)]
    assert all(r.recipe.path == path for r in replicas.instances.values())


def test_a_replica_the_checks_refuse_is_located_and_named(write_fleet, tmp_path):
    fleet = load_fleet(write_fleet(cpu_fleet()))
    good = tmp_path / "one.yaml"
    good.write_text(RECIPE.format(max_model_len=2048, env=""))
    single = single_server(fleet, good)
    bad = tmp_path / "bad.yaml"
    bad.write_text(RECIPE.format(max_model_len=512, env=""))  # too short for the long class
    with pytest.raises(RecipeError) as caught:
        replicas_fleet(fleet, single, bad)
    problem = next(d for d in caught.value.diagnostics if d.path == "engine.max_model_len")
    assert (problem.file, problem.line) == (str(bad), 6)
    assert problem.message.startswith(f"replica-1 (--single {bad}, on instance 'short''s "
                                      "cores and share): ")


ENDPOINTS = {"replica-1": Endpoint("http://127.0.0.1:9001", "tiny-llama"),
             "replica-2": Endpoint("http://127.0.0.1:9002", "tiny-llama")}


def test_the_replicas_router_is_one_balanced_group_with_no_class_rule():
    fleet = load_fleet(SHIPPED)
    router = replicas_fleet(fleet, single_server(fleet)).router
    config = router_config(router, ENDPOINTS, 120)
    assert [(d["model_name"], d["model_info"]["mopt_instance"], d["litellm_params"]["model"],
             d["litellm_params"]["api_base"], "order" in d["litellm_params"],
             "max_input_tokens" in d["model_info"]) for d in config["model_list"]] == [
        ("tiny-llama", "replica-1", "hosted_vllm/tiny-llama", "http://127.0.0.1:9001/v1",
         False, False),
        ("tiny-llama", "replica-2", "hosted_vllm/tiny-llama", "http://127.0.0.1:9002/v1",
         False, False)]
    assert config["router_settings"] == {"routing_strategy": "least-busy", "num_retries": 0,
                                         "disable_cooldowns": True}
    assert config["general_settings"] == {"master_key": "os.environ/LITELLM_MASTER_KEY"}
    # every class asks for the one name, and may land on any replica
    assert request_label(router, "short") == request_label(router, "long") == ("tiny-llama", ())
    assert expected_instance(router, "long", 1100) == ANY_INSTANCE


def record(warmup: bool = False, ok: bool = True) -> RequestRecord:
    return RequestRecord(index=0, warmup=warmup, sent_at=0.0, request_class="short",
                         prompt_tokens=50, ok=ok)


def test_a_balanced_groups_counts_must_add_up_and_use_every_replica():
    fleet = load_fleet(SHIPPED)
    routed = Routed(replicas_fleet(fleet, single_server(fleet)).router)
    for warmup in (True, False, False, False):
        routed.add(record(warmup))
    routed.add(record(ok=False))  # a failed request is not counted as served
    assert routed.sent == {ANY_INSTANCE: 4} and routed.unknown == 0
    assert settled({"replica-1": 3, "replica-2": 1}, routed.sent)
    assert not settled({"replica-1": 3, "replica-2": 0}, routed.sent)
    assert not settled({"replica-1": 4, "replica-2": None}, routed.sent)
    classes = {"replica-1": ("short",), "replica-2": ("short",)}
    balanced = instance_figures(routed, {"replica-1": 3, "replica-2": 1}, 10.0, classes)
    assert balanced["replica-1"]["sent_by_rules"] is None and balanced["replica-1"]["match"]
    assert balanced["replica-1"]["ttft_p99_ms"] is None  # which replica answered is unknown
    assert routing_problems(balanced, 0, 4) == []
    lopsided = instance_figures(routed, {"replica-1": 4, "replica-2": 0}, 10.0, classes)
    assert routing_problems(lopsided, 0, 4) == [
        "replica-2 served no requests: the router did not balance over it"]
    short = instance_figures(routed, {"replica-1": 2, "replica-2": None}, 10.0, classes)
    assert routing_problems(short, 0, 4) == [
        "replica-2 served an unreadable number of requests: the router did not balance "
        "over it", "the instances served 2 requests in all, 4 were sent"]
