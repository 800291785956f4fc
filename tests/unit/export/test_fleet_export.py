"""A fleet exported as Compose, Kubernetes and systemd files: every instance with its share,
the router with the configuration `mopt apply` generates, only the router for clients, no
secret written; the manifests validated offline like a recipe's."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys

import jsonschema
import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.export import ExportError, ExportOptions
from model_optimizer.export.fleet import build_fleet_deployment, instance_ports
from model_optimizer.export.fleet_run import export_fleet
from model_optimizer.fleet import load_fleet
from model_optimizer.fleet.router import Endpoint, router_config
from tests.unit.export.compose_rules import COMPOSE_RULES
from tests.unit.export.fleet_fixtures import SHIPPED, documents, export, gpu_fleet_file

KEY = "sk-mopt-" + "0123456789abcdef" * 2  # a master key as mopt apply makes one


@pytest.fixture(autouse=True)
def router_bin(tmp_path, monkeypatch):
    """A `litellm` for the systemd unit to name (the router need not be installed)."""
    fake = tmp_path / "bin" / "litellm"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("MOPT_ROUTER_BIN", str(fake))
    return fake


def test_the_cpu_fleet_in_compose_publishes_only_the_router(tmp_path):
    fleet, out = export(SHIPPED, tmp_path, "compose")
    document = yaml.safe_load((out.folder / "compose.yaml").read_text())
    jsonschema.Draft202012Validator(COMPOSE_RULES).validate(document)
    services = document["services"]
    assert list(services) == ["short", "long", "mopt-tiny-cpu-fleet-router"]
    router = services.pop("mopt-tiny-cpu-fleet-router")
    assert router["ports"] == ["127.0.0.1:4000:4000"]
    assert router["image"] == "ghcr.io/berriai/litellm:main-v1.108.7"  # pyproject's pin
    assert router["depends_on"] == {"short": {"condition": "service_healthy"},
                                    "long": {"condition": "service_healthy"}}
    for name, cores in (("short", "0"), ("long", "1")):
        assert "ports" not in services[name]
        assert services[name]["environment"] == {"VLLM_CPU_KVCACHE_SPACE": "1",
                                                 "VLLM_CPU_OMP_THREADS_BIND": cores}
        assert services[name]["env_file"] == [f"./instances/{name}/vllm.env"]
    long_config = yaml.safe_load((out.folder / "instances/long/vllm.yaml").read_text())
    assert (long_config["max-model-len"], long_config["port"]) == (2048, 8002)
    assert "--port" in services["long"]["command"] and "8002" in services["long"]["command"]


def test_the_router_config_is_mopt_apply_s_over_the_format_s_addresses(tmp_path):
    fleet, out = export(SHIPPED, tmp_path, "compose")
    written = yaml.safe_load((out.folder / "router.compose.yaml").read_text())
    expected = router_config(fleet.router, {
        "short": Endpoint("http://short:8001", "tiny-llama"),
        "long": Endpoint("http://long:8002", "tiny-llama-long")}, 300)
    assert written == expected
    assert written["general_settings"] == {"master_key": "os.environ/LITELLM_MASTER_KEY"}
    local = yaml.safe_load((out.folder / "router.yaml").read_text())
    assert [d["litellm_params"]["api_base"] for d in local["model_list"]] == [
        "http://127.0.0.1:8001/v1", "http://127.0.0.1:8002/v1"]


def test_the_gpu_fleet_shares_one_card_in_compose(tmp_path, model_dir):
    _, out = export(gpu_fleet_file(tmp_path, model_dir), tmp_path, "compose")
    services = yaml.safe_load((out.folder / "compose.yaml").read_text())["services"]
    for name in ("fast", "precise"):
        devices = services[name]["deploy"]["resources"]["reservations"]["devices"]
        assert devices == [{"driver": "nvidia", "device_ids": ["0"], "capabilities": ["gpu"]}]
        config = yaml.safe_load((out.folder / f"instances/{name}/vllm.yaml").read_text())
        assert config["gpu-memory-utilization"] == 0.45
    fast = yaml.safe_load((out.folder / "instances/fast/vllm.yaml").read_text())
    assert (fast["quantization"], fast["kv-cache-dtype"], fast["max-num-seqs"]) == (
        "fp8", "fp8", 64)
    assert "VLLM_CPU_OMP_THREADS_BIND" not in services["fast"]["environment"]


@pytest.mark.parametrize("which", ["cpu", "gpu"])
def test_the_kubernetes_manifests_pass_the_schemas(tmp_path, model_dir, which):
    path = SHIPPED if which == "cpu" else gpu_fleet_file(tmp_path, model_dir)
    _, out = export(path, tmp_path, "kubernetes")
    found = documents(out.folder)
    if which == "gpu":
        found += documents(out.folder, "gpu-sharing.yaml")
    assert [d["kind"] for d in found] == (
        ["ConfigMap", "Deployment", "Service"] * 3 + ["NetworkPolicy"]
        + (["ConfigMap"] if which == "gpu" else []))
    version = kubernetes_validate.latest_version()
    for document in found:
        kubernetes_validate.validate(document, version, strict=True)
    broken = found[1]
    broken["spec"]["template"]["spec"]["nodeSelector"] = ["not", "a", "map"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, version, strict=True)


def pods(folder):
    return {d["metadata"]["name"]: d["spec"]["template"] for d in documents(folder)
            if d["kind"] == "Deployment"}


def test_kubernetes_shares_the_gpu_by_time_slicing(tmp_path, model_dir):
    _, out = export(gpu_fleet_file(tmp_path, model_dir), tmp_path, "kubernetes")
    [plugin] = documents(out.folder, "gpu-sharing.yaml")
    config = yaml.safe_load(plugin["data"]["mopt-gpu-fleet"])
    assert config == {"version": "v1", "sharing": {"timeSlicing": {
        "failRequestsGreaterThanOne": True,
        "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}
    for name in ("mopt-gpu-fleet-fast", "mopt-gpu-fleet-precise"):
        pod = pods(out.folder)[name]["spec"]
        assert pod["nodeSelector"] == {"nvidia.com/device-plugin.config": "mopt-gpu-fleet"}
        assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    maps = {d["metadata"]["name"]: d for d in documents(out.folder) if d["kind"] == "ConfigMap"}
    share = yaml.safe_load(maps["mopt-gpu-fleet-fast-config"]["data"]["vllm.yaml"])
    assert share["gpu-memory-utilization"] == 0.45
    assert "no memory isolation" in (out.folder / "gpu-sharing.yaml").read_text()


def test_kubernetes_on_cpu_requests_the_instance_s_cores(tmp_path):
    _, out = export(SHIPPED, tmp_path, "kubernetes")
    for name in ("mopt-tiny-cpu-fleet-short", "mopt-tiny-cpu-fleet-long"):
        container = pods(out.folder)[name]["spec"]["containers"][0]
        assert container["resources"]["requests"]["cpu"] == "2"  # its core, the API server's
        assert "nvidia.com/gpu" not in container["resources"]["limits"]
        assert all(e["name"] != "VLLM_CPU_OMP_THREADS_BIND" for e in container["env"])
    assert not (out.folder / "gpu-sharing.yaml").exists()


def test_only_the_router_reaches_the_instances_and_its_key_is_a_secret(tmp_path):
    _, out = export(SHIPPED, tmp_path, "kubernetes")
    found = documents(out.folder)
    [policy] = [d for d in found if d["kind"] == "NetworkPolicy"]
    templates = pods(out.folder)
    router = templates.pop("mopt-tiny-cpu-fleet-router")
    chosen = policy["spec"]["podSelector"]["matchLabels"]
    allowed = policy["spec"]["ingress"][0]["from"][0]["podSelector"]["matchLabels"]
    assert all(chosen.items() <= t["metadata"]["labels"].items() for t in templates.values())
    assert allowed.items() <= router["metadata"]["labels"].items()
    assert not allowed.items() <= next(iter(templates.values()))["metadata"]["labels"].items()
    env = {e["name"]: e for e in router["spec"]["containers"][0]["env"]}
    assert env["LITELLM_MASTER_KEY"] == {"name": "LITELLM_MASTER_KEY", "valueFrom": {
        "secretKeyRef": {"name": "mopt-tiny-cpu-fleet-router-key", "key": "master-key"}}}
    config = yaml.safe_load(next(d for d in found if d["metadata"]["name"]
                                 == "mopt-tiny-cpu-fleet-router-config")["data"]["router.yaml"])
    services = {d["metadata"]["name"]: d["spec"]["ports"][0]["port"] for d in found
                if d["kind"] == "Service"}
    for deployment in config["model_list"]:
        host, port = deployment["litellm_params"]["api_base"][7:-3].split(":")
        assert services[host] == int(port)  # each instance at its Service


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    sections: dict[str, dict[str, list[str]]] = {}
    for line in text.splitlines():
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
        elif line and not line.startswith("#"):
            key, _, value = line.partition("=")
            current.setdefault(key, []).append(value)
    return sections


def test_systemd_units_start_the_router_after_its_instances(tmp_path, router_bin):
    _, out = export(SHIPPED, tmp_path, "systemd")
    router = parse_unit((out.folder / "mopt-tiny-cpu-fleet-router.service").read_text())
    instances = ["mopt-tiny-cpu-fleet-short.service", "mopt-tiny-cpu-fleet-long.service"]
    assert router["Unit"]["After"] == ["network-online.target " + " ".join(instances)]
    assert router["Unit"]["Wants"] == ["network-online.target " + " ".join(instances)]
    argv = shlex.split(router["Service"]["ExecStart"][0])
    assert argv == [str(router_bin), "--config", str(out.folder / "router.yaml"), "--host",
                    "127.0.0.1", "--port", "4000", "--num_workers", "1"]
    assert router["Service"]["EnvironmentFile"] == [
        "/etc/mopt/mopt-tiny-cpu-fleet-router.secrets.env"]
    short = parse_unit((out.folder / instances[0]).read_text())["Service"]
    assert short["EnvironmentFile"] == [str(out.folder / "instances/short/vllm.env")]
    assert "VLLM_CPU_OMP_THREADS_BIND=0" in (out.folder / "instances/short/vllm.env").read_text()
    config = yaml.safe_load((out.folder / "instances/short/vllm.yaml").read_text())
    assert config["host"] == "127.0.0.1"  # loopback: only the router is for clients
    _, wide = export(SHIPPED, tmp_path / "wide", "systemd", router_host="0.0.0.0")
    text = (wide.folder / "mopt-tiny-cpu-fleet-router.service").read_text()
    assert "--host 0.0.0.0 --port 4000" in text


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed (Debian: apt-get install systemd)")
def test_the_fleet_s_units_pass_systemd_analyze_verify(tmp_path):
    _, out = export(SHIPPED, tmp_path, "systemd", python=sys.executable)
    units = sorted(str(p) for p in out.folder.glob("*.service"))
    assert len(units) == 3
    checked = subprocess.run(["systemd-analyze", "verify", "--man=no", *units],
                             capture_output=True, text=True, timeout=60, check=False)
    assert checked.returncode == 0 and ".service" not in checked.stderr, checked.stderr


def test_no_file_holds_the_router_s_key(tmp_path, model_dir, monkeypatch):
    monkeypatch.setenv("LITELLM_MASTER_KEY", KEY)
    for path in (SHIPPED, gpu_fleet_file(tmp_path, model_dir)):
        _, out = export(path, tmp_path / path.stem)
        written = [p for p in out.folder.rglob("*") if p.is_file()]
        assert len(written) == len(out.files) >= 16
        assert not [p for p in written if KEY in p.read_text()]
        archived = [p for p in out.archive.rglob("*") if p.is_file()]
        assert not [p for p in archived if KEY in p.read_text()]


def test_a_secret_in_the_way_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("ROUTER_API_KEY", "simple-shuffle")  # a value router.yaml holds
    with pytest.raises(ExportError, match="router.yaml: the export would contain a secret"):
        export(SHIPPED, tmp_path)
    assert not (tmp_path / "out").exists()


def test_instances_never_validated_are_refused_unless_forced(tmp_path, model_dir):
    path = gpu_fleet_file(tmp_path, model_dir)
    with pytest.raises(ExportError, match=r"instance fast: revision 1 was never validated"
                                          r".*instance precise: revision 1 was never"):
        export(path, tmp_path, force=False)
    _, out = export(path, tmp_path)
    record = yaml.safe_load((out.archive / "export.json").read_text())
    assert [line.split(":")[0] for line in record["forced_over"]] == [
        "instance fast", "instance precise"]
    assert record["fleet_revision"] == 2 and record["router"]["port"] == 4000
    assert record["instances"]["fast"]["gpu_memory_utilization"] == 0.45
    assert (out.archive / "recipe.given.yaml").read_text() == path.read_text()


def test_ports_keep_the_router_s_and_each_instance_s_own(tmp_path, model_dir):
    path = gpu_fleet_file(tmp_path, model_dir, port=8001)
    fleet = load_fleet(path)
    assert instance_ports(fleet, 8001) == {"fast": 8002, "precise": 8003}
    assert build_fleet_deployment(fleet, 9000, force=True).router_port == 9000
    doc = yaml.safe_load(path.read_text())
    doc["instances"]["precise"]["port"] = 8002
    path.write_text(yaml.safe_dump(doc))
    assert instance_ports(load_fleet(path), 8001) == {"fast": 8003, "precise": 8002}


def test_options_for_one_server_are_refused(tmp_path, model_dir):
    fleet = load_fleet(SHIPPED)
    for options, message in ((dict(replicas=2), "--replicas is for a recipe"),
                             (dict(tune_workers=2), "--tune-workers is for a recipe"),
                             (dict(router_host="a b"), "is not an address")):
        with pytest.raises(ExportError, match=message):
            export_fleet(fleet, tmp_path / "o", tmp_path / "r",
                         ExportOptions(("compose",), **options))
    doc = yaml.safe_load(gpu_fleet_file(tmp_path, model_dir).read_text())
    doc["instances"]["fast"]["engine"]["tensor_parallel_size"] = 2
    doc["hardware"]["count"] = 2  # the fleet loads: a machine with two cards
    (tmp_path / "tp.yaml").write_text(yaml.safe_dump(doc))
    with pytest.raises(ExportError, match="instance 'fast' has tensor_parallel_size 2"):
        export(tmp_path / "tp.yaml", tmp_path)
    assert not (tmp_path / "o").exists() and not (tmp_path / "out").exists()


def test_the_cli_exports_a_fleet_file(tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["export", str(SHIPPED), "--to", str(tmp_path / "o"), "-f",
                                 "compose", "--force", "--runs-dir", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    assert "exported fleet tiny-cpu-fleet as compose" in result.output
    assert (tmp_path / "o" / "compose.yaml").is_file()
    assert (tmp_path / "o" / "serve-router.sh").stat().st_mode & 0o111
    refused = runner.invoke(app, ["export", str(SHIPPED), "--to", str(tmp_path / "p"), "-f",
                                  "compose", "--set", "engine.max_num_seqs=2"])
    assert refused.exit_code == 2 and "--set is for recipes" in refused.output
