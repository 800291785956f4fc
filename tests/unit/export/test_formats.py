"""Compose, Kubernetes and systemd exports, parsed and checked field by field; the
Kubernetes manifests validated offline against the schemas kubernetes-validate ships."""

from __future__ import annotations

import shlex

import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from model_optimizer.archive.versions import vllm_version
from model_optimizer.cli.main import app
from model_optimizer.export import ExportOptions, build_deployment, export_recipe
from model_optimizer.export.deployment import CPU_IMAGE, GPU_IMAGE
from model_optimizer.export.vllm import serve_argv
from model_optimizer.recipe import load_recipe
from model_optimizer.recipe.render import SERVER_MODULE
from tests.unit.export.conftest import write_recipe

ALL = ("vllm", "compose", "kubernetes", "systemd")


def export(tmp_path, model_dir, accelerator="cpu", **options):
    loaded = load_recipe(write_recipe(tmp_path, model_dir, pins=True, accelerator=accelerator,
                                      extra_engine='  env:\n    HF_TOKEN: ${HF_TOKEN}\n'
                                      if accelerator != "cpu" else ""))
    return loaded, export_recipe(loaded, tmp_path / "out", tmp_path / "runs",
                                 ExportOptions(ALL, port=8100, **options))


def test_compose_runs_the_official_image_with_the_exported_config(tmp_path, model_dir):
    loaded, out = export(tmp_path, model_dir, accelerator="H100")
    document = yaml.safe_load((out.folder / "compose.yaml").read_text())
    assert document["name"] == "mopt-tiny-export"
    vllm = document["services"]["vllm"]
    assert vllm["image"] == f"{GPU_IMAGE}:v{vllm_version()}"
    assert vllm["entrypoint"] == ["python3", "-m", SERVER_MODULE]
    assert vllm["command"] == ["--config", "/etc/mopt/vllm.yaml", "--model", "/models/tiny",
                               "--host", "0.0.0.0", "--port", "8100"]
    assert vllm["ports"] == ["127.0.0.1:8100:8100"]
    assert vllm["deploy"]["resources"]["reservations"]["devices"] == [
        {"driver": "nvidia", "count": 2, "capabilities": ["gpu"]}]
    assert vllm["shm_size"] == "8gb"
    assert vllm["healthcheck"]["test"][-1].endswith(
        "urlopen('http://127.0.0.1:8100/health', timeout=4)")
    assert vllm["healthcheck"]["start_period"] == "300s"
    mounts = {v["target"]: v for v in vllm["volumes"]}
    assert mounts["/models/tiny"] == {"type": "bind", "source": str(model_dir),
                                      "target": "/models/tiny", "read_only": True}
    assert mounts["/etc/mopt/vllm.yaml"]["read_only"] is True
    assert vllm["environment"] == {
        "HF_TOKEN": "${HF_TOKEN:?set HF_TOKEN (the recipe reads it from the environment)}"}
    pins = loaded.resolved["model"]["pins"]["sha256"]
    assert vllm["labels"] == {"mopt.recipe": "tiny-export", "mopt.recipe-revision": "3",
                              "mopt.checkpoint-sha256": pins,
                              "mopt.validated-run-id": "20260102T030405Z-tiny-export-a1b2c3"}


def test_compose_on_cpu_uses_the_cpu_image_and_no_gpu(tmp_path, model_dir):
    _, out = export(tmp_path, model_dir)
    vllm = yaml.safe_load((out.folder / "compose.yaml").read_text())["services"]["vllm"]
    assert vllm["image"].startswith(CPU_IMAGE + ":")
    assert "reservations" not in vllm["deploy"]["resources"]
    assert vllm["deploy"]["resources"]["limits"] == {"memory": "6g"}
    assert vllm["env_file"] == ["./vllm.env"]


def manifests(out, name="kubernetes.yaml"):
    return list(yaml.safe_load_all((out.folder / name).read_text()))


@pytest.mark.parametrize("accelerator", ["cpu", "H100"])
def test_kubernetes_manifests_pass_the_schemas(tmp_path, model_dir, accelerator):
    _, out = export(tmp_path, model_dir, accelerator=accelerator, hpa_max=5, tune_workers=3)
    version = kubernetes_validate.latest_version()
    documents = manifests(out) + manifests(out, "tune-job.yaml")
    assert [d["kind"] for d in documents] == ["ConfigMap", "Deployment", "Service",
                                              "HorizontalPodAutoscaler", "ConfigMap",
                                              "PersistentVolumeClaim", "Job"]
    for document in documents:
        kubernetes_validate.validate(document, version, strict=True)
    broken = manifests(out)[1]
    broken["spec"]["replicas"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, version, strict=True)


def test_kubernetes_deployment_fields(tmp_path, model_dir):
    loaded, out = export(tmp_path, model_dir, accelerator="H100", replicas=2, hpa_max=6)
    config_map, deployment, service, hpa = manifests(out)
    assert config_map["data"]["vllm.yaml"] == (out.folder / "vllm.yaml").read_text()
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert deployment["spec"]["replicas"] == 2
    assert container["resources"]["limits"] == {"memory": f"{out_memory(out)}Gi",
                                                "nvidia.com/gpu": "2"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": 8100}
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert container["startupProbe"]["failureThreshold"] == 30  # 300 s start-up / 10 s
    annotations = deployment["metadata"]["annotations"]
    assert annotations["mopt/recipe-revision"] == "3"
    assert annotations["mopt/checkpoint-sha256"] == loaded.resolved["model"]["pins"]["sha256"]
    assert {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {
        "name": "mopt-tiny-export-env", "key": "HF_TOKEN"}}} in container["env"]
    model = next(v for v in pod["volumes"] if v["name"] == "model")
    assert model["persistentVolumeClaim"] == {"claimName": "mopt-tiny-export-model",
                                              "readOnly": True}
    assert service["spec"]["ports"] == [{"name": "http", "port": 8100, "targetPort": "http"}]
    assert hpa["spec"]["minReplicas"] == 2 and hpa["spec"]["maxReplicas"] == 6
    assert hpa["spec"]["metrics"][0]["pods"]["metric"]["name"] == "vllm_num_requests_waiting"


def out_memory(out):
    return yaml.safe_load((out.folder / "compose.yaml").read_text())["services"]["vllm"][
        "deploy"]["resources"]["limits"]["memory"].removesuffix("g")


def test_the_tune_job_reads_the_database_url_from_a_secret(tmp_path, model_dir):
    loaded, out = export(tmp_path, model_dir, tune_workers=4)
    recipe_map, _, job = manifests(out, "tune-job.yaml")
    assert recipe_map["data"]["recipe.yaml"] == loaded.source_text
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == (
        "Indexed", 4, 4)
    container = spec["template"]["spec"]["containers"][0]
    assert container["command"] == ["mopt"]
    assert container["args"][:4] == ["tune", "/etc/mopt/recipe.yaml", "--study-name",
                                     "mopt-tiny-export"]
    storage = next(e for e in container["env"] if e["name"] == "MOPT_TUNE_STORAGE")
    assert storage == {"name": "MOPT_TUNE_STORAGE", "valueFrom": {"secretKeyRef": {
        "name": "mopt-tiny-export-tune-db", "key": "url"}}}
    assert "postgresql://" not in (out.folder / "tune-job.yaml").read_text().split(
        "\n", 2)[2]


def parse_unit(text: str) -> dict[str, dict[str, list[str]]]:
    """A systemd unit as {section: {key: [values]}} (keys may repeat)."""
    sections: dict[str, dict[str, list[str]]] = {}
    current = None
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), {})
        else:
            key, _, value = line.partition("=")
            current.setdefault(key, []).append(value)
    return sections


def test_the_systemd_unit(tmp_path, model_dir):
    loaded, out = export(tmp_path, model_dir)
    unit = parse_unit((out.folder / "mopt-tiny-export.service").read_text())
    service = unit["Service"]
    deployment_python = ExportOptions(ALL).python
    assert shlex.split(service["ExecStart"][0]) == serve_argv(
        build_deployment(loaded, 8100), deployment_python, str(out.folder))
    assert service["EnvironmentFile"] == [str(out.folder / "vllm.env")]
    assert service["Restart"] == ["on-failure"] and service["KillMode"] == ["control-group"]
    assert service["MemoryMax"] == ["6G"] and service["TimeoutStartSec"] == ["300"]
    assert unit["Install"]["WantedBy"] == ["multi-user.target"]
    assert unit["Unit"]["After"] == ["network-online.target"]


def test_the_cli_writes_several_formats_and_refuses_an_unknown_one(tmp_path, model_dir):
    recipe = write_recipe(tmp_path, model_dir)
    runner = CliRunner()
    ok = runner.invoke(app, ["export", str(recipe), "--to", str(tmp_path / "o"), "-f", "vllm",
                             "-f", "systemd", "--runs-dir", str(tmp_path / "runs"), "--json"])
    assert ok.exit_code == 0, ok.output
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == [
        "mopt-tiny-export-verify.service", "mopt-tiny-export-verify.timer",
        "mopt-tiny-export.service", "serve.json", "serve.sh", "vllm.env", "vllm.yaml"]
    bad = runner.invoke(app, ["export", str(recipe), "--to", str(tmp_path / "p"), "-f", "helm",
                              "--runs-dir", str(tmp_path / "runs")])
    assert bad.exit_code == 2 and "unknown export format helm" in bad.output
    assert not (tmp_path / "p").exists()
