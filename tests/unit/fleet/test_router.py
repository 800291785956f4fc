"""The router's configuration is a pure function of the fleet's rules (LiteLLM's proxy
format), and the same rules say where each request must land."""

from __future__ import annotations

from model_optimizer.fleet import load_fleet
from model_optimizer.fleet.router import (
    Endpoint,
    expected_instance,
    request_label,
    router_config,
)

from .conftest import SHIPPED, cpu_fleet

ENDPOINTS = {"short": Endpoint("http://127.0.0.1:9001", "m-short"),
             "long": Endpoint("http://127.0.0.1:9002", "m-long")}


def deployments(config: dict) -> list[tuple]:
    return [(d["model_name"], d["model_info"]["mopt_instance"], d["litellm_params"]["api_base"],
             d["litellm_params"]["model"], d["litellm_params"].get("order"),
             d["litellm_params"].get("tags"), d["model_info"].get("max_input_tokens"))
            for d in config["model_list"]]


def test_length_rules_become_ordered_deployments_with_a_context_limit():
    fleet = load_fleet(SHIPPED)
    config = router_config(fleet.router, ENDPOINTS, 300)
    assert deployments(config) == [
        ("tiny-llama", "short", "http://127.0.0.1:9001/v1", "hosted_vllm/m-short", 1, None, 256),
        ("tiny-llama", "long", "http://127.0.0.1:9002/v1", "hosted_vllm/m-long", 2, None, None)]
    assert config["router_settings"] == {"routing_strategy": "simple-shuffle", "num_retries": 0,
                                         "disable_cooldowns": True,
                                         "enable_pre_call_checks": True}
    # the key is named, never written
    assert config["general_settings"] == {"master_key": "os.environ/LITELLM_MASTER_KEY"}
    assert config["litellm_settings"]["request_timeout"] == 300.0


def test_tag_rules_become_tagged_deployments_and_the_fallback_takes_untagged(write_fleet):
    doc = cpu_fleet()
    doc["router"]["routes"] = [{"class": "short", "to": "short", "tag": "chat"},
                               {"class": "long", "to": "long", "tag": "docs"}]
    fleet = load_fleet(write_fleet(doc))
    config = router_config(fleet.router, ENDPOINTS, 60)
    assert [(d[0], d[1], d[5]) for d in deployments(config)] == [
        ("m", "short", ["chat"]), ("m", "long", ["docs", "default"])]
    assert config["router_settings"]["enable_tag_filtering"] is True
    assert "enable_pre_call_checks" not in config["router_settings"]
    assert request_label(fleet.router, "short") == ("m", ("chat",))
    assert request_label(fleet.router, None) == ("m", ())


def test_model_rules_become_model_groups_beside_the_routers_own_name(write_fleet):
    doc = cpu_fleet()
    doc["router"]["routes"] = [{"class": "short", "to": "short", "model": "chat"},
                               {"class": "long", "to": "long", "model": "docs"}]
    fleet = load_fleet(write_fleet(doc))
    config = router_config(fleet.router, ENDPOINTS, 60)
    assert [(d[0], d[1], d[4]) for d in deployments(config)] == [
        ("chat", "short", None), ("docs", "long", None), ("m", "long", None)]
    assert request_label(fleet.router, "long") == ("docs", ())
    assert expected_instance(fleet.router, "short", 5000) == "short"  # the name decides


def test_where_each_request_must_land_by_length_and_fallback(write_fleet):
    doc = cpu_fleet(hardware={"accelerator": "A10"})  # three instances: more than 2 cores
    for name in ("short", "long", "mid"):
        doc["instances"][name] = {"model": {"path": "m"}, "gpu_memory_utilization": 0.3}
    doc["router"]["routes"] = [{"class": "short", "to": "short", "max_prompt_tokens": 128},
                               {"class": "long", "to": "mid", "max_prompt_tokens": 1000}]
    fleet = load_fleet(write_fleet(doc))
    router = fleet.router
    assert [expected_instance(router, "long", n) for n in (100, 128, 129, 1000, 1001)] == [
        "short", "short", "mid", "mid", "long"]
    assert expected_instance(router, "short", None) is None  # no length: cannot say
    config = router_config(router, {**ENDPOINTS, "mid": Endpoint("http://x:1", "m")}, 60)
    assert [(d[1], d[4], d[6]) for d in deployments(config)] == [
        ("short", 1, 128), ("mid", 2, 1000), ("long", 3, None)]
