"""The ``kubernetes`` format of a fleet: a Deployment and Service per instance, the router
(ConfigMap, Deployment, Service), a NetworkPolicy, and on a GPU the device plugin's
time-slicing configuration.

**How the instances share one GPU.** Kubernetes hands out ``nvidia.com/gpu`` whole, to one
container: two pods, or two containers of one pod, cannot share a card by asking for a
fraction of it. The NVIDIA device plugin's time-slicing (``sharing.timeSlicing``) makes it
advertise ``replicas`` schedulable copies of each card, so each instance's pod asks for
``nvidia.com/gpu: 1`` and gets a copy of the same card. Time-slicing isolates nothing: every
pod sees the whole card's memory, so each instance's ``gpu_memory_utilization`` share (in
its ``vllm.yaml``; vLLM reserves that fraction of the card's total at start) is what keeps
them apart, and the fleet's shares must add up to less than 1. ``gpu-sharing.yaml`` is
the plugin's configuration (``replicas`` = the number of instances,
``failRequestsGreaterThanOne``), and each pod runs only on a node labelled with it
(``nodeSelector: nvidia.com/device-plugin.config``): a node whose card holds only this
fleet. MIG is not written: a MIG slice is a card of its own to vLLM, so each share would
have to be rewritten as a fraction of its slice (docs/fleet.md says when to use it).

On a CPU each instance's pod requests its engine's cores plus one for vLLM's API server
(requests = limits: exclusive cores under the kubelet's static CPU manager policy), with
no ``VLLM_CPU_OMP_THREADS_BIND``: the machine's core ids mean nothing in a pod, and vLLM
binds to the cores the pod gets.

Only the router's Service is for clients; the NetworkPolicy lets only the router's pods
reach the instances (where the cluster's network plugin enforces policies). The router's
master key comes from the Secret ``<fleet>-router-key`` (key ``master-key``), never from
the files. Everything passes the Kubernetes schemas offline (tests/unit/export).
"""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from model_optimizer.export import kubernetes as k8s
from model_optimizer.export.deployment import CONTAINER_CONFIG
from model_optimizer.export.fleet import ROUTER_CONFIG_FILE, FleetDeployment, FleetMember
from model_optimizer.export.formats import FleetFormat, FleetRendering, register_fleet
from model_optimizer.export.vllm import config_text
from model_optimizer.fleet.launch import ROUTER_ENV, ROUTER_HEALTH, router_args
from model_optimizer.fleet.router import MASTER_KEY_ENV
from model_optimizer.recipe.security import one_line

MANIFEST_FILE = "kubernetes.yaml"
GPU_SHARING_FILE = "gpu-sharing.yaml"
#: the node label the device plugin reads its per-node configuration name from
PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU_RESOURCE = "nvidia.com/gpu"
ROUTER_KEY = "master-key"
ROUTER_CONFIG_DIR = "/etc/litellm"
#: a floor for LiteLLM's proxy with one worker; raise it for heavy traffic
ROUTER_RESOURCES = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}}
PART_OF, COMPONENT = "app.kubernetes.io/part-of", "app.kubernetes.io/component"


def service_url(member: FleetMember) -> str:
    """An instance's URL inside the cluster (its Service)."""
    return f"http://{member.dep.name}:{member.dep.port}"


def sharing_config(fleet: FleetDeployment) -> dict:
    """The device plugin's time-slicing configuration: one copy of the card per instance."""
    return {"version": "v1", "sharing": {"timeSlicing": {
        "failRequestsGreaterThanOne": True,
        "resources": [{"name": GPU_RESOURCE, "replicas": len(fleet.members)}]}}}


def _roles(fleet: FleetDeployment, role: str) -> dict[str, str]:
    return {PART_OF: fleet.name, COMPONENT: role}


def instance_deployment(fleet: FleetDeployment, member: FleetMember) -> dict:
    """The recipe format's Deployment of one instance, with its share of the fleet."""
    doc = k8s.deployment(member.dep, 1, member.startup_timeout_s)  # not bound: see above
    pod = doc["spec"]["template"]
    pod["metadata"]["labels"] = {**pod["metadata"]["labels"], **_roles(fleet, "instance")}
    container = pod["spec"]["containers"][0]
    if fleet.on_cpu:
        cores = str(len(member.cores or ()) + 1)
        for amounts in container["resources"].values():
            amounts["cpu"] = cores
    else:
        pod["spec"]["nodeSelector"] = {PLUGIN_CONFIG_LABEL: fleet.name}
    return doc


def router_documents(fleet: FleetDeployment) -> list[dict]:
    """The router's ConfigMap, Deployment and Service."""
    name, port, labels = fleet.router_name, fleet.router_port, _roles(fleet, "router")
    selector = {"app.kubernetes.io/name": name}
    probe = {"httpGet": {"path": ROUTER_HEALTH, "port": port}, "periodSeconds": k8s.PROBE_PERIOD_S,
             "timeoutSeconds": 5}
    env = [{"name": key, "value": value} for key, value in ROUTER_ENV.items()]
    env.append({"name": MASTER_KEY_ENV, "valueFrom": {"secretKeyRef": {
        "name": f"{name}-key", "key": ROUTER_KEY}}})
    container = {
        "name": "router", "image": fleet.router_image,
        "args": router_args(f"{ROUTER_CONFIG_DIR}/{ROUTER_CONFIG_FILE}", "0.0.0.0", port),
        "ports": [{"name": "http", "containerPort": port}], "env": env,
        "resources": ROUTER_RESOURCES,
        "volumeMounts": [{"name": "config", "mountPath": ROUTER_CONFIG_DIR, "readOnly": True}],
        "startupProbe": probe | {"failureThreshold": max(1, math.ceil(
            fleet.router.startup_timeout_s / k8s.PROBE_PERIOD_S))},
        "readinessProbe": probe | {"failureThreshold": 3},
        "livenessProbe": probe | {"failureThreshold": 6}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": name, "labels": selector},
                  "spec": {"replicas": 1, "selector": {"matchLabels": selector},
                           "template": {"metadata": {"labels": selector | labels},
                                        "spec": {"containers": [container], "volumes": [
                                            {"name": "config",
                                             "configMap": {"name": f"{name}-config"}}]}}}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
               "spec": {"selector": selector,
                        "ports": [{"name": "http", "port": port, "targetPort": "http"}]}}
    config = fleet.router_yaml(service_url, "the instances' Services")
    return [k8s.config_map(f"{name}-config", ROUTER_CONFIG_FILE, config), deployment, service]


def network_policy(fleet: FleetDeployment) -> dict:
    """Only the router's pods reach the instances."""
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": f"{fleet.name}-instances"},
            "spec": {"podSelector": {"matchLabels": _roles(fleet, "instance")},
                     "policyTypes": ["Ingress"],
                     "ingress": [{"from": [{"podSelector": {
                         "matchLabels": _roles(fleet, "router")}}]}]}}


def documents(fleet: FleetDeployment) -> list[dict]:
    """Every manifest of ``kubernetes.yaml``, in the order to apply them."""
    out: list[dict] = []
    for member in fleet.members.values():
        out += [k8s.config_map(f"{member.dep.name}-config", Path(CONTAINER_CONFIG).name,
                               config_text(member.dep)),
                instance_deployment(fleet, member), k8s.service(member.dep)]
    return out + router_documents(fleet) + [network_policy(fleet)]


def _header(fleet: FleetDeployment) -> str:
    name = fleet.router_name
    text = (f"# Kubernetes manifests of fleet {one_line(fleet.fleet_name)} revision "
            f"{fleet.revision}, generated by mopt export.\n"
            f"# First: kubectl create secret generic {name}-key "
            f"--from-literal={ROUTER_KEY}=\"${MASTER_KEY_ENV}\"\n"
            f"# Apply: kubectl apply -f {MANIFEST_FILE}; clients use the Service {name} "
            f"(port {fleet.router_port}).\n"
            "# The NetworkPolicy lets only the router reach the instances.\n")
    if not fleet.on_cpu:
        text += (f"# The instances share one GPU by the NVIDIA device plugin's time-slicing: "
                 f"see {GPU_SHARING_FILE}.\n")
    return text


def sharing_file(fleet: FleetDeployment) -> str:
    """``gpu-sharing.yaml``: the plugin's ConfigMap, and how to apply it."""
    config = k8s.config_map(f"{fleet.name}-gpu-sharing", fleet.name,
                            yaml.safe_dump(sharing_config(fleet), sort_keys=False))
    shares = ", ".join(f"{name} {member.share:g}" for name, member in fleet.members.items())
    header = (f"# NVIDIA device plugin configuration for fleet {one_line(fleet.fleet_name)} "
              "(generated by mopt export): time-slicing,\n"
              f"# {len(fleet.members)} copies of the card, one per instance; no memory "
              f"isolation: the gpu_memory_utilization shares ({shares}) keep them apart.\n"
              "# 1. kubectl apply -n <the plugin's namespace> -f gpu-sharing.yaml\n"
              f"# 2. point the plugin at it: helm upgrade ... --set config.name="
              f"{fleet.name}-gpu-sharing (GPU Operator: devicePlugin.config.name)\n"
              f"# 3. kubectl label node <node> {PLUGIN_CONFIG_LABEL}={fleet.name}\n"
              "#    (a node with one GPU that only this fleet uses)\n")
    return header + yaml.safe_dump(config, sort_keys=False)


def render(fleet: FleetDeployment) -> dict[str, str]:
    """``kubernetes.yaml`` (and ``gpu-sharing.yaml`` on a GPU)."""
    files = {MANIFEST_FILE: k8s.dump(documents(fleet), _header(fleet))}
    if not fleet.on_cpu:
        files[GPU_SHARING_FILE] = sharing_file(fleet)
    return files


@register_fleet
class FleetKubernetesFormat(FleetFormat):
    """``kubernetes``: the instances, the router, the policy and the GPU sharing."""

    name, order = "kubernetes", 2

    def render(self, given: FleetRendering) -> dict[str, str]:
        """The manifests."""
        return render(given.fleet)
