"""`mopt export --format vllm`: the config, env file and argument list mopt launches with."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
import yaml

from model_optimizer.export import ExportError, ExportOptions, build_deployment, export_recipe
from model_optimizer.export.deployment import VLLM_DEFAULT_PORT, host_memory_gib, split_env
from model_optimizer.export.run import check_no_secrets, environment_secrets
from model_optimizer.plan import estimate
from model_optimizer.recipe import load_recipe
from model_optimizer.recipe.render import SERVER_MODULE, engine_options, server_env
from tests.unit.export.conftest import TINY_CONFIG, write_recipe


def env_file(path: Path) -> dict[str, str]:
    """``NAME=value`` lines as a shell reads them (comments skipped)."""
    values = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name] = shlex.split(value)[0] if value else ""
    return values


def test_the_vllm_files_hold_what_mopt_launches(tmp_path, model_dir):
    loaded = load_recipe(write_recipe(tmp_path, model_dir))
    out = export_recipe(loaded, tmp_path / "out", tmp_path / "runs",
                        ExportOptions(("vllm",), port=8123, python="/opt/py/bin/python"))
    folder = out.folder
    config = yaml.safe_load((folder / "vllm.yaml").read_text())
    assert config == dict(engine_options(loaded.spec, loaded.base_dir, port=8123))
    assert config["model"] == str(model_dir) and config["enable-prefix-caching"] is False
    assert env_file(folder / "vllm.env") == server_env(loaded.spec) == {
        "VLLM_CPU_KVCACHE_SPACE": "1"}
    serve = json.loads((folder / "serve.json").read_text())
    assert serve["argv"] == ["/opt/py/bin/python", "-m", SERVER_MODULE, "--config",
                             "./vllm.yaml"]
    assert serve["port"] == 8123 and serve["host"] == "127.0.0.1"
    script = (folder / "serve.sh").read_text()
    assert script.splitlines()[-1] == (f"exec /opt/py/bin/python -m {SERVER_MODULE} "
                                       "--config ./vllm.yaml")
    assert ". ./vllm.env" in script and (folder / "serve.sh").stat().st_mode & 0o100


@pytest.mark.parametrize(("recipe_port", "asked", "expected"),
                         [(0, None, VLLM_DEFAULT_PORT), (0, 9001, 9001), (9123, None, 9123),
                          (9123, 9001, 9001)])
def test_the_port_rule(tmp_path, model_dir, recipe_port, asked, expected):
    loaded = load_recipe(write_recipe(tmp_path, model_dir,
                                      extra_engine=f"  port: {recipe_port}\n"))
    assert build_deployment(loaded, asked).config["port"] == expected


def test_host_memory_is_planned_weights_plus_kv_space_plus_overhead(tmp_path, model_dir):
    loaded = load_recipe(write_recipe(tmp_path, model_dir))
    weights = estimate(loaded.resolved, TINY_CONFIG).weight_bytes / 2**30
    assert host_memory_gib(loaded, str(model_dir), True) == -(-(weights + 1 + 4) // 1)
    assert build_deployment(loaded).memory_gib == 6  # tiny weights + 1 GiB KV + 4


def test_drifted_pins_are_refused_unless_forced(tmp_path, model_dir):
    loaded = load_recipe(write_recipe(tmp_path, model_dir, pins=True))
    build_deployment(loaded)  # the pinned checkpoint: fine
    (model_dir / "model.safetensors").write_bytes(b"weights v2")
    with pytest.raises(ExportError, match="model.safetensors changed.*--force"):
        export_recipe(loaded, tmp_path / "out", tmp_path / "runs", ExportOptions(("vllm",)))
    assert not (tmp_path / "out").exists() and not (tmp_path / "runs").exists()
    out = export_recipe(loaded, tmp_path / "out", tmp_path / "runs",
                        ExportOptions(("vllm",), force=True))
    record = json.loads((out.archive / "export.json").read_text())
    assert "model.safetensors changed" in record["forced_over"][0]


def test_an_export_is_archived_with_every_file(tmp_path, model_dir):
    loaded = load_recipe(write_recipe(tmp_path, model_dir))
    out = export_recipe(loaded, tmp_path / "out", tmp_path / "runs",
                        ExportOptions(("vllm", "systemd")))
    status = json.loads((out.archive / "status.json").read_text())
    assert status["status"] == "ok" and status["kind"] == "export"
    assert (out.archive / "manifest.json").is_file()
    assert (out.archive / "recipe.given.yaml").read_text() == loaded.source_text
    record = json.loads((out.archive / "export.json").read_text())
    assert record["formats"] == ["vllm", "systemd"]
    assert sorted(record["files"]) == sorted(p.name for p in out.folder.iterdir())
    for name in record["files"]:
        assert (out.archive / "exported" / name).read_text() == (out.folder / name).read_text()


def test_an_export_never_writes_a_secret(tmp_path, model_dir, monkeypatch):
    secret = "hf_" + "Q7zX9kLm2Np4Rt6Vw8Yb0Cd3Fg5Hj"
    monkeypatch.setenv("HF_TOKEN", secret)
    recipe = write_recipe(tmp_path, model_dir, extra_engine="")
    text = recipe.read_text().replace('VLLM_CPU_KVCACHE_SPACE: "1"\n',
                                      'VLLM_CPU_KVCACHE_SPACE: "1"\n    HF_TOKEN: ${HF_TOKEN}\n')
    recipe.write_text(text)
    loaded = load_recipe(recipe)
    out = export_recipe(loaded, tmp_path / "out", tmp_path / "runs", ExportOptions(
        ("vllm", "compose", "kubernetes", "systemd"), tune_workers=2))
    written = [p for p in (*out.folder.rglob("*"), *out.archive.rglob("*")) if p.is_file()]
    assert len(written) > 10
    for path in written:
        assert secret not in path.read_bytes().decode(errors="replace"), path
    assert "HF_TOKEN: ${HF_TOKEN:?set HF_TOKEN" in (out.folder / "compose.yaml").read_text()


def test_a_literal_secret_is_refused_before_anything_is_written():
    with pytest.raises(ExportError, match="HF_TOKEN.*secret"):
        split_env({"HF_TOKEN": "hf_" + "Q7zX9kLm2Np4Rt6Vw8Yb0Cd3Fg5Hj"})
    assert split_env({"A": "1", "HF_TOKEN": "${HF_TOKEN}"}) == ({"A": "1"},
                                                               {"HF_TOKEN": "HF_TOKEN"})


def test_the_default_interpreter_is_the_one_mopt_runs_under():
    assert ExportOptions(("vllm",)).python == sys.executable


def test_the_working_directory_is_no_secret_but_a_token_is():
    environ = {"PWD": "/home/me/models", "OLDPWD": "/srv", "DB_PASSWORD": "hunter2hunter2",
               "HF_TOKEN": "hf_" + "Q7zX9kLm2Np4Rt6Vw8Yb0Cd3Fg5Hj", "HOME": "/root"}
    assert sorted(environment_secrets(environ)) == sorted(
        ["hunter2hunter2", "hf_" + "Q7zX9kLm2Np4Rt6Vw8Yb0Cd3Fg5Hj"])
    with pytest.raises(ExportError, match="compose.yaml: the export would contain a secret"):
        check_no_secrets({"vllm.yaml": "model: /home/me/models\n",
                          "compose.yaml": "x: hunter2hunter2\n"}, ["hunter2hunter2"])
