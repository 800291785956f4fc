"""Exports against hostile recipes (issue 37): control characters, secret references, `$`,
system folders, unvalidated recipes and unpinned hub models."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest
import yaml

from model_optimizer.export import ExportError, ExportOptions, build_deployment, export_recipe
from model_optimizer.recipe import RecipeSpec, load_recipe
from model_optimizer.recipe.render import engine_options
from tests.unit.export.conftest import write_recipe


def bypassed(loaded, section: str, key: str, value):
    """``loaded`` with a value its validation would have refused (a recipe checked by an
    older mopt, or a library caller): the export must hold on its own."""
    loaded.resolved.setdefault(section, {})[key] = value
    loaded.spec = RecipeSpec.of(loaded.resolved)
    return loaded


@pytest.mark.parametrize(("section", "key"), [("model", "revision"), ("validated", "hardware"),
                                              ("validated", "run_id")])
def test_a_newline_that_bypassed_validation_is_refused_by_the_export(tmp_path, model_dir,
                                                                     section, key):
    loaded = load_recipe(write_recipe(tmp_path, model_dir))
    if section == "validated":
        loaded.resolved["validated"] = {"at": "2026-01-01T00:00:00Z", "run_id": "r1"}
    bypassed(loaded, section, key, "main\n[Service]\nExecStartPre=/opt/evil/payload --run")
    with pytest.raises(ExportError, match=rf"{section}\.{key} holds the control character"):
        export_recipe(loaded, tmp_path / "out", tmp_path / "runs", ExportOptions(("systemd",)))
    assert not (tmp_path / "out").exists()


def test_a_recipe_file_name_with_newlines_cannot_add_options(tmp_path, model_dir):
    name = "tiny\nworker-extension-cls: evil.Ext\nx: .yaml"
    loaded = load_recipe(write_recipe(tmp_path, model_dir, name=name))
    out = export_recipe(loaded, tmp_path / "out", tmp_path / "runs",
                        ExportOptions(("vllm", "compose", "kubernetes", "systemd")))
    text = (out.folder / "vllm.yaml").read_text()
    assert yaml.safe_load(text) == dict(engine_options(loaded.spec, loaded.base_dir, 8000))
    assert "worker-extension-cls" not in yaml.safe_load(text)
    header = [line for line in text.splitlines() if line.startswith("#")]
    assert len(header) == 2 and "tiny\\nworker-extension-cls: evil.Ext\\nx: .yaml" in header[0]


def test_the_systemd_unit_takes_percent_dollar_and_backslash_literally(tmp_path, model_dir):
    loaded = load_recipe(write_recipe(tmp_path, model_dir))
    folder = tmp_path / "out%h$HOME\\n"
    out = export_recipe(loaded, folder, tmp_path / "runs", ExportOptions(("systemd",)))
    unit = (out.folder / "mopt-tiny-export.service").read_text()
    escaped = str(tmp_path).replace("%", "%%") + "/out%%h$HOME\\\\n"
    assert f"WorkingDirectory={escaped}\n" in unit
    exec_start = next(line for line in unit.splitlines() if line.startswith("ExecStart="))
    assert f"'{str(tmp_path)}/out%%h$$HOME\\\\n/vllm.yaml'" in exec_start
    assert build_deployment(loaded).labels["mopt.recipe"] == "tiny-export"


API_KEY = '  extra_args:\n    api-key: "${VLLM_API_KEY}"\n'


def exported_with_api_key(tmp_path, model_dir, python="/opt/py/bin/python"):
    loaded = load_recipe(write_recipe(tmp_path, model_dir, extra_engine=API_KEY))
    return export_recipe(loaded, tmp_path / "out", tmp_path / "runs", ExportOptions(
        ("vllm", "compose", "kubernetes", "systemd"), tune_workers=2, python=python))


def test_a_referenced_option_never_reaches_a_file_as_its_literal_value(tmp_path, model_dir):
    out = exported_with_api_key(tmp_path, model_dir)
    for name in ("vllm.yaml", "kubernetes.yaml"):
        text = (out.folder / name).read_text()
        assert "api-key: ${VLLM_API_KEY}" not in text and "api-key: '${" not in text, name
        assert "# --api-key is not in this file: it is passed from $VLLM_API_KEY" in text
    assert "api-key" not in yaml.safe_load((out.folder / "vllm.yaml").read_text())
    compose = yaml.safe_load((out.folder / "compose.yaml").read_text())["services"]["vllm"]
    assert compose["command"][-2:] == [
        "--api-key", "${VLLM_API_KEY:?set VLLM_API_KEY (the recipe reads it from the "
        "environment)}"]
    documents = list(yaml.safe_load_all((out.folder / "kubernetes.yaml").read_text()))
    container = documents[1]["spec"]["template"]["spec"]["containers"][0]
    assert container["args"][-2:] == ["--api-key", "$(VLLM_API_KEY)"]
    assert {"name": "VLLM_API_KEY", "valueFrom": {"secretKeyRef": {
        "name": "mopt-tiny-export-env", "key": "VLLM_API_KEY"}}} in container["env"]
    job = list(yaml.safe_load_all((out.folder / "tune-job.yaml").read_text()))[-1]
    tune_env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert "VLLM_API_KEY" in [e["name"] for e in tune_env]  # mopt tune expands it itself
    serve = json.loads((out.folder / "serve.json").read_text())
    assert serve["args_from_env"] == [["--api-key", "VLLM_API_KEY"]]


def run_serve_sh(folder, environ):
    return subprocess.run(["sh", str(folder / "serve.sh")], env=environ, capture_output=True,
                          text=True, timeout=30, check=False)


def test_serve_sh_passes_the_key_from_the_environment_and_refuses_to_start_without(
        tmp_path, model_dir):
    out = exported_with_api_key(tmp_path, model_dir, python="/bin/echo")
    environ = {"PATH": os.environ["PATH"]}
    started = run_serve_sh(out.folder, {**environ, "VLLM_API_KEY": "k-123"})
    assert started.returncode == 0 and started.stdout.split()[-2:] == ["--api-key", "k-123"]
    for missing in ({}, {"VLLM_API_KEY": ""}):
        refused = run_serve_sh(out.folder, {**environ, **missing})
        assert refused.returncode != 0 and "set VLLM_API_KEY" in refused.stderr
        assert "--api-key" not in refused.stdout


def test_the_systemd_unit_reads_the_key_from_its_secrets_file_and_checks_it(tmp_path,
                                                                            model_dir):
    out = exported_with_api_key(tmp_path, model_dir, python=sys.executable)
    unit = (out.folder / "mopt-tiny-export.service").read_text().splitlines()
    assert "EnvironmentFile=/etc/mopt/mopt-tiny-export.secrets.env" in unit  # required
    exec_start = next(line for line in unit if line.startswith("ExecStart="))
    assert exec_start.endswith(" --api-key ${VLLM_API_KEY}")
    pre = next(line for line in unit if line.startswith("ExecStartPre="))
    check = shlex.split(pre.removeprefix("ExecStartPre="))
    assert len(check) == 4 and "'\"'\"'" not in pre  # python -c CODE NAME: plain quoting
    for environ, code in (({}, 1), ({"VLLM_API_KEY": ""}, 1), ({"VLLM_API_KEY": "k"}, 0)):
        ran = subprocess.run(check, env=environ, capture_output=True, text=True, timeout=30,
                             check=False)
        assert ran.returncode == code, ran.stderr
    assert "set VLLM_API_KEY in /etc/mopt/mopt-tiny-export.secrets.env" in subprocess.run(
        check, env={}, capture_output=True, text=True, timeout=30, check=False).stderr


def compose_expand(text: str, environ: dict[str, str]) -> str:
    """Compose's interpolation, as far as these files use it: ``$$``, ``${VAR}``,
    ``${VAR:?message}`` and ``$VAR``."""
    def one(match: re.Match) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1) or match.group(2)
        return environ.get(name, "")
    return re.sub(r"\$\$|\$\{([A-Za-z_]\w*)(?::\?[^}]*)?\}|\$([A-Za-z_]\w*)", one, text)


def kubernetes_expand(text: str, environ: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion in command, args and env values: ``$$`` is ``$``."""
    def one(match: re.Match) -> str:
        return "$" if match.group(0) == "$$" else environ.get(match.group(1), match.group(0))
    return re.sub(r"\$\$|\$\(([A-Za-z_]\w*)\)", one, text)


DOLLARS = "a$b$(HOME)${HOME}$HOME"


def test_compose_and_kubernetes_take_a_dollar_literally(tmp_path, model_dir):
    folder = model_dir.rename(model_dir.with_name("tiny$HOME"))
    loaded = load_recipe(write_recipe(tmp_path, folder, accelerator="H100",
                                      extra_engine=f"  env:\n    MY_SETTING: '{DOLLARS}'\n"))
    out = export_recipe(loaded, tmp_path / "out", tmp_path / "runs",
                        ExportOptions(("compose", "kubernetes"), tune_workers=2))
    environ = {"HOME": "/home/me", "b": "B"}
    service = yaml.safe_load((out.folder / "compose.yaml").read_text())["services"]["vllm"]
    assert compose_expand(service["environment"]["MY_SETTING"], environ) == DOLLARS
    sources = [compose_expand(v["source"], environ) for v in service["volumes"]]
    assert str(folder) in sources and str(folder).endswith("tiny$HOME")
    assert compose_expand(service["command"][3], environ) == "/models/tiny$HOME"
    documents = list(yaml.safe_load_all((out.folder / "kubernetes.yaml").read_text()))
    container = documents[1]["spec"]["template"]["spec"]["containers"][0]
    value = next(e["value"] for e in container["env"] if e["name"] == "MY_SETTING")
    assert kubernetes_expand(value, environ) == DOLLARS
    assert kubernetes_expand(container["args"][3], environ) == "/models/tiny$HOME"
    job = list(yaml.safe_load_all((out.folder / "tune-job.yaml").read_text()))[-1]
    args = job["spec"]["template"]["spec"]["containers"][0]["args"]
    at = args.index("--set")
    assert [kubernetes_expand(a, environ) for a in args[at:at + 2]] == [
        "--set", "model.path=/models/tiny$HOME"]


@pytest.mark.parametrize("folder", ["/", "/etc", "~"])
def test_a_system_folder_is_never_mounted(tmp_path, model_dir, folder):
    loaded = bypassed(load_recipe(write_recipe(tmp_path, model_dir)), "model", "path", folder)
    with pytest.raises(ExportError, match="a system folder; an export never mounts one"):
        export_recipe(loaded, tmp_path / "out", tmp_path / "runs", ExportOptions(("compose",)))
    assert not (tmp_path / "out").exists()
