"""What an export refuses without --force (issue 37): a recipe never validated or whose
validation did not resolve, a hub model at a branch; the tune Job's claim, the HPA's
adapter; Compose and systemd files checked as their tools read them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from types import SimpleNamespace

import jsonschema
import kubernetes_validate
import pytest
import yaml

from model_optimizer.export import ExportError, ExportOptions, export_recipe
from model_optimizer.recipe import load_recipe
from tests.unit.export.compose_rules import COMPOSE_RULES
from tests.unit.export.conftest import write_recipe

COMMIT = "0123456789abcdef0123456789abcdef01234567"
HUB_MODEL = "some-org/tiny-model"


def export(loaded, tmp_path, *formats, **options):
    return export_recipe(loaded, tmp_path / "out", tmp_path / "runs",
                         ExportOptions(formats or ("vllm",), **options))


def test_a_recipe_never_validated_is_refused_unless_forced(tmp_path, model_dir):
    loaded = load_recipe(write_recipe(tmp_path, model_dir, validated=""))
    with pytest.raises(ExportError, match=r"revision 3 was never validated.*mopt sweep, mopt "
                                          r"tune or mopt optimize.*--force"):
        export(loaded, tmp_path)
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()
    out = export(loaded, tmp_path, force=True)
    record = json.loads((out.archive / "export.json").read_text())
    assert "never validated" in record["forced_over"][0]


def test_a_validation_that_did_not_resolve_is_refused_and_legacy_ones_pass(tmp_path,
                                                                           model_dir):
    loaded = load_recipe(write_recipe(tmp_path, model_dir))
    assert "resolved" not in loaded.resolved["validated"]  # written before resolved existed
    assert export(loaded, tmp_path).forced_over == []
    loaded.resolved["validated"]["resolved"] = False  # what a sweep writes when not resolved
    with pytest.raises(ExportError, match=r"validated\.resolved is false, run 20260102T030405Z"
                                          r"-tiny-export-a1b2c3"):
        export(loaded, tmp_path)
    loaded.resolved["validated"]["resolved"] = True
    assert export(loaded, tmp_path).forced_over == []


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    """An empty local Hugging Face cache, offline: ``refs(branch)`` writes a branch's ref."""
    cache = tmp_path / "hf" / "hub"
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def refs(branch: str, commit: str = COMMIT) -> None:
        ref = cache / ("models--" + HUB_MODEL.replace("/", "--")) / "refs" / branch
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(commit)
    return refs


@pytest.mark.parametrize("revision", [None, "main"])
def test_a_hub_model_at_a_branch_is_served_at_the_commit_the_cache_names(tmp_path, hub_cache,
                                                                         revision):
    loaded = load_recipe(write_recipe(tmp_path, HUB_MODEL, accelerator="H100",
                                      revision=revision))
    with pytest.raises(ExportError, match=r"revision 'main', a branch.*models--some-org--tiny"
                                          r"-model/refs/main is missing.*model\.revision: "
                                          r"<40-hex commit>.*huggingface-cli download"):
        export(loaded, tmp_path)
    hub_cache("main")
    out = export(loaded, tmp_path, "vllm", "compose")
    config = yaml.safe_load((out.folder / "vllm.yaml").read_text())
    assert config["model"] == HUB_MODEL
    assert config["revision"] == config["tokenizer-revision"] == COMMIT
    labels = yaml.safe_load((out.folder / "compose.yaml").read_text())["services"]["vllm"][
        "labels"]
    assert labels["mopt.model-revision"] == COMMIT and labels["mopt.model-branch"] == "main"


def test_a_commit_revision_needs_no_cache_and_the_hub_is_asked_when_online(
        tmp_path, hub_cache, monkeypatch):
    loaded = load_recipe(write_recipe(tmp_path, HUB_MODEL, accelerator="H100",
                                      revision=COMMIT))
    assert yaml.safe_load((export(loaded, tmp_path).folder / "vllm.yaml").read_text())[
        "revision"] == COMMIT
    asked = []
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr("huggingface_hub.HfApi.model_info", lambda self, repo, revision,
                        timeout: asked.append((repo, revision, timeout))
                        or SimpleNamespace(sha="f" * 40))
    tagged = load_recipe(write_recipe(tmp_path, HUB_MODEL, accelerator="H100",
                                      revision="v1.0"))
    config = yaml.safe_load((export(tagged, tmp_path).folder / "vllm.yaml").read_text())
    assert config["revision"] == "f" * 40 and asked == [(HUB_MODEL, "v1.0", 10.0)]


def test_the_tune_job_keeps_its_archives_on_a_claim(tmp_path, model_dir):
    loaded = load_recipe(write_recipe(tmp_path, model_dir))
    out = export(loaded, tmp_path, "kubernetes", tune_workers=3)
    recipe_map, claim, job = yaml.safe_load_all((out.folder / "tune-job.yaml").read_text())
    assert claim["kind"] == "PersistentVolumeClaim"
    assert claim["metadata"]["name"] == "mopt-tiny-export-tune-work"
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    pod = job["spec"]["template"]["spec"]
    work = next(v for v in pod["volumes"] if v["name"] == "work")
    assert work == {"name": "work", "persistentVolumeClaim": {
        "claimName": "mopt-tiny-export-tune-work"}}
    assert not [v for v in pod["volumes"] if "emptyDir" in v and v["name"] == "work"]
    args = pod["containers"][0]["args"]
    assert args[-4:] == ["--output", "/work/recipe.tuned-$(JOB_COMPLETION_INDEX).yaml",
                         "--runs-dir", "/work/runs-$(JOB_COMPLETION_INDEX)"]
    assert {"name": "work", "mountPath": "/work"} in pod["containers"][0]["volumeMounts"]
    for document in (recipe_map, claim, job):
        kubernetes_validate.validate(document, kubernetes_validate.latest_version(),
                                     strict=True)


def test_the_hpa_comes_with_its_metrics_adapter_rule(tmp_path, model_dir):
    loaded = load_recipe(write_recipe(tmp_path, model_dir))
    assert "prometheus-adapter.yaml" not in export(loaded, tmp_path, "kubernetes").files
    out = export(loaded, tmp_path, "kubernetes", hpa_max=4)
    text = (out.folder / "kubernetes.yaml").read_text()
    assert "needs the Prometheus adapter with the rule in\n# prometheus-adapter.yaml" in text
    hpa = list(yaml.safe_load_all(text))[-1]
    metric = hpa["spec"]["metrics"][0]["pods"]["metric"]["name"]
    [rule] = yaml.safe_load((out.folder / "prometheus-adapter.yaml").read_text())["rules"][
        "custom"]
    assert rule["name"] == {"matches": "^vllm:num_requests_waiting$", "as": metric}
    assert rule["seriesQuery"].startswith("vllm:num_requests_waiting{")
    pod = list(yaml.safe_load_all(text))[1]["spec"]["template"]["metadata"]["annotations"]
    assert pod["prometheus.io/scrape"] == "true" and pod["prometheus.io/port"] == "8000"


API_AND_DOLLARS = ('  extra_args:\n    api-key: "${VLLM_API_KEY}"\n'
                   '  env:\n    HF_TOKEN: ${HF_TOKEN}\n    MY_SETTING: "a$b$(c)"\n')


@pytest.mark.parametrize("accelerator", ["cpu", "H100"])
def test_the_compose_file_follows_compose_s_rules(tmp_path, model_dir, accelerator):
    extra = API_AND_DOLLARS if accelerator != "cpu" else API_AND_DOLLARS.split("  env:")[0]
    loaded = load_recipe(write_recipe(tmp_path, model_dir, accelerator=accelerator,
                                      extra_engine=extra))
    document = yaml.safe_load((export(loaded, tmp_path, "compose").folder / "compose.yaml")
                              .read_text())
    jsonschema.Draft202012Validator(COMPOSE_RULES).validate(document)
    document["services"]["vllm"]["environment"]["X"] = "a$b"  # what the old export wrote
    with pytest.raises(jsonschema.ValidationError, match="a\\$b"):
        jsonschema.Draft202012Validator(COMPOSE_RULES).validate(document)


SYSTEMD_ANALYZE = shutil.which("systemd-analyze")


def verify_unit(path) -> subprocess.CompletedProcess:
    return subprocess.run([SYSTEMD_ANALYZE, "verify", "--man=no", str(path)],
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.skipif(SYSTEMD_ANALYZE is None, reason="systemd-analyze is not installed "
                    "(Debian: apt-get install systemd)")
def test_the_systemd_unit_passes_systemd_analyze_verify(tmp_path, model_dir):
    loaded = load_recipe(write_recipe(tmp_path, model_dir, extra_engine=API_AND_DOLLARS.split(
        "  env:")[0]))
    out = export(loaded, tmp_path, "systemd", python=sys.executable)
    unit = out.folder / "mopt-tiny-export.service"
    checked = verify_unit(unit)
    assert checked.returncode == 0 and unit.name not in checked.stderr, checked.stderr
    broken = tmp_path / "broken.service"
    broken.write_text(unit.read_text().replace("Restart=on-failure", "Restart=sometimes"))
    assert "broken.service" in verify_unit(broken).stderr  # the check sees a bad value
