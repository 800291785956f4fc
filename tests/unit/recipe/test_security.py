"""What a shared recipe may make mopt run: code-loading settings, secrets, binding, numbers."""

import json
import os
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.errors import RecipeError
from model_optimizer.recipe import load_recipe, load_recipe_text
from model_optimizer.recipe.render import vllm_argv

from .conftest import VALID


def errors_of(text):
    with pytest.raises(RecipeError) as info:
        load_recipe_text(text, "r.yaml")
    return info.value.diagnostics


def with_engine(line: str) -> str:
    return VALID.replace("engine:\n", f"engine:\n  {line}\n")


def test_vllm_config_file_flag_is_refused_so_it_cannot_turn_on_remote_code():
    [diag] = errors_of(with_engine("extra_args: {config: other.yaml}"))
    assert diag.path == "engine.extra_args.config" and "refused" in diag.message
    assert "trust-remote-code" in diag.hint and diag.line == 6


@pytest.mark.parametrize("setting", [
    "extra_args: {middleware: evil.Middleware}",
    "extra_args: {worker-extension-cls: evil.Ext}",
    "extra_args: {logits-processors: evil.Proc}",
    "extra_args: {tool-parser-plugin: /tmp/evil.py}",
    "extra_args: {allowed-local-media-path: /}",
    "env: {LD_PRELOAD: /tmp/evil.so}",
    "env: {PYTHONPATH: /tmp/evil}",
])
def test_code_loading_settings_are_refused_without_allow_code(setting):
    [diag] = errors_of(with_engine(setting))
    name = diag.path.rsplit(".", 1)[-1]
    assert "does not let a recipe load code" in diag.message
    assert f"add '{name}' to engine.allow_code" in diag.hint
    allowed = with_engine(setting).replace("engine:\n", f"engine:\n  allow_code: [{name}]\n")
    assert load_recipe_text(allowed).resolved["engine"]["allow_code"] == [name]


def test_allow_code_names_only_guarded_settings():
    [diag] = errors_of(with_engine("allow_code: [max-num-seqs]"))
    assert diag.path == "engine.allow_code[0]" and "not a code-loading" in diag.message


def test_trust_remote_code_is_always_stated_on_the_command_line():
    off = vllm_argv(load_recipe_text(VALID).resolved, None)
    assert "--no-trust-remote-code" in off and "--trust-remote-code" not in off
    on = vllm_argv(load_recipe_text(VALID.replace("path: some/model", "path: some/model\n"
                                                  "  trust_remote_code: true")).resolved, None)
    assert "--trust-remote-code" in on and "--no-trust-remote-code" not in on


def test_show_prints_trust_setting_and_allowed_code(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(with_engine("extra_args: {worker-extension-cls: my.Ext}\n"
                                "  allow_code: [worker-extension-cls]"))
    result = CliRunner().invoke(app, ["show", str(path)])
    assert result.exit_code == 0, result.output
    assert ("trust_remote_code: false; code-loading settings allowed by engine.allow_code: "
            "worker-extension-cls") in result.output
    data = json.loads(CliRunner().invoke(app, ["show", str(path), "--json"]).stdout)
    assert data["allow_code"] == ["worker-extension-cls"] and data["trust_remote_code"] is False


def test_vllm_config_export_carries_the_environment(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(with_engine("env: {VLLM_CPU_KVCACHE_SPACE: '2', HF_TOKEN: '${HF_TOKEN}'}"))
    out = tmp_path / "v.yaml"
    result = CliRunner().invoke(app, ["show", str(path), "--vllm-config", str(out)])
    assert result.exit_code == 0, result.output
    header = out.read_text().splitlines()[1]
    assert header == ('# Run it without mopt: VLLM_CPU_KVCACHE_SPACE=2 HF_TOKEN="${HF_TOKEN}" '
                      'vllm serve --config v.yaml')


@pytest.mark.parametrize(("setting", "path"), [
    ("env: {HFTOKEN: abc}", "engine.env.HFTOKEN"),
    ("env: {GH_PAT: abc}", "engine.env.GH_PAT"),
    ("env: {S3_SECRETKEY: abc}", "engine.env.S3_SECRETKEY"),
    ("env: {MYPASSPHRASE: abc}", "engine.env.MYPASSPHRASE"),
    ("env: {JWT: abc}", "engine.env.JWT"),
    ("env: {PRIVATEKEY: abc}", "engine.env.PRIVATEKEY"),
    ("env: {DB_URL: 'postgresql://u:pw@db/x'}", "engine.env.DB_URL"),
    ("env: {DB_URL: 'postgresql://db/x?password=pw'}", "engine.env.DB_URL"),
    ("env: {SOMETHING: hf_abcdefghijklmnopqrstuvwxyz0123}", "engine.env.SOMETHING"),
])
def test_secrets_written_into_a_recipe_are_refused(setting, path):
    [diag] = errors_of(with_engine(setting))
    assert diag.path == path and "looks like a secret" in diag.message
    assert "${" in diag.hint


def test_token_shaped_value_anywhere_is_refused():
    token = "ghp_abcdefghijklmnopqrstuvwx12"
    text = VALID.replace("name: demo", f"name: demo\ndescription: key {token}")
    [diag] = errors_of(text)
    assert diag.path == "description" and "credential" in diag.message


def test_secret_named_switches_and_numbers_are_not_secrets():
    text = with_engine("extra_args: {dbo-prefill-token-threshold: 64, allow-credentials: true}")
    assert load_recipe_text(text).resolved["engine"]["extra_args"]["allow-credentials"] is True


def test_empty_host_is_refused():
    [diag] = errors_of(with_engine("host: ''"))
    assert diag.path == "engine.host"


@pytest.mark.parametrize(("setting", "path"), [
    ("gpu_memory_utilization: .nan", "engine.gpu_memory_utilization"),
    ("extra_args: {swap-space: .inf}", "engine.extra_args.swap-space"),
])
def test_nan_and_infinity_are_refused_with_their_line(setting, path):
    diags = errors_of(with_engine(setting))
    assert [d.path for d in diags] == [path] and diags[0].line == 6
    assert "not a usable number" in diags[0].message


def test_infinite_request_rate_is_still_allowed():
    text = VALID.replace("num_requests: 10", "num_requests: 10\n  request_rate: .inf")
    assert load_recipe_text(text).resolved["workload"]["request_rate"] == float("inf")


def test_nan_from_set_is_refused_naming_the_set(write_recipe):
    with pytest.raises(RecipeError) as info:
        load_recipe(write_recipe(), ["engine.gpu_memory_utilization=.nan"])
    [diag] = info.value.diagnostics
    assert diag.file == "--set engine.gpu_memory_utilization=.nan"


def test_vllm_flags_are_read_once_then_cached(write_recipe, fake_vllm, monkeypatch):
    from model_optimizer.recipe import flags
    text = with_engine("extra_args: {swap-space: 4}")
    assert load_recipe(write_recipe(text)).warnings == []
    flags._installed_flags.cache_clear()
    assert load_recipe(write_recipe(text)).warnings == []
    assert fake_vllm == [1]  # the second process-level lookup read the cache file


def test_snapshot_is_the_fallback_when_vllm_cannot_be_read(monkeypatch, tmp_path):
    from model_optimizer.recipe import flags
    monkeypatch.setenv("MOPT_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(flags, "installed_vllm_version", lambda: "9.9")
    monkeypatch.setattr(flags, "_ask_vllm", lambda: None)
    flags._installed_flags.cache_clear()
    known, source = flags.known_flags({"nope"})
    flags._installed_flags.cache_clear()
    assert "max-num-seqs" in known and source == "vLLM 0.32.0 (mopt's snapshot)"


@pytest.mark.parametrize(("yaml_line", "path", "shown"), [
    ('model:\n  path: some/model\n  revision: "main\\n[Service]\\nExecStartPre=/opt/evil/payload '
     '--run"', "model.revision", "\\n"),
    ('validated:\n  at: "2026-01-01T00:00:00Z"\n  run_id: "r1\\rExecStartPre=x"',
     "validated.run_id", "\\r"),
    ('validated:\n  at: "2026-01-01T00:00:00Z"\n  run_id: r1\n  hardware: "cpu\\u2028x"',
     "validated.hardware", "\\u2028"),
    ('description: "colour \\e[31m"', "description", "\\x1b"),
    ('model:\n  path: "some/model\\x85"', "model.path", "\\x85"),
])
def test_a_control_character_in_any_recipe_string_is_refused_where_it_stands(
        yaml_line, path, shown):
    text = VALID.replace("model:\n  path: some/model\n", "") + yaml_line + "\n"
    if not yaml_line.startswith("model:"):
        text += "model:\n  path: some/model\n"
    diags = [d for d in errors_of(text) if d.path == path]
    assert len(diags) == 1, [d.format() for d in errors_of(text)]
    diag = diags[0]
    assert f"control character '{shown}'" in diag.message
    assert diag.file == "r.yaml" and diag.line is not None and diag.column is not None
    assert "write it on one line" in diag.hint


def test_a_control_character_in_a_key_is_refused_and_a_description_may_span_lines():
    [diag] = errors_of(with_engine('extra_args: {"seed\\nworker-cls": "1"}'))
    assert diag.path == "engine.extra_args.seed\nworker-cls" and diag.line == 6
    assert "this key holds the control character '\\n'" in diag.message
    text = VALID + 'description: "first line\\n\\tsecond line"\n'
    assert load_recipe_text(text).resolved["description"] == "first line\n\tsecond line"


HOSTILE_ENV = "env: {MY_SETTING: '${HOME}$(touch PWNED)}', HF_TOKEN: '${HF_TOKEN}'}"


def pasted(line: str, cwd) -> dict[str, str]:
    """Run ``line`` (a command prefix of assignments) in a real shell, as a person pasting
    it would; the environment the command then sees."""
    ran = subprocess.run(["sh", "-c", line + " env"], cwd=cwd, capture_output=True, text=True,
                         env={"PATH": os.environ["PATH"], "HOME": "/home/me",
                              "HF_TOKEN": "t0ken"}, timeout=30, check=True)
    return dict(item.split("=", 1) for item in ran.stdout.splitlines() if "=" in item)


def test_the_run_it_without_mopt_line_runs_nothing_when_pasted(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(with_engine(HOSTILE_ENV))
    out = tmp_path / "v.yaml"
    assert CliRunner().invoke(app, ["show", str(path), "--vllm-config", str(out)]).exit_code == 0
    header = out.read_text().splitlines()[1].removeprefix("# Run it without mopt: ")
    seen = pasted(header.split(" vllm serve")[0], tmp_path)
    assert seen["MY_SETTING"] == "${HOME}$(touch PWNED)}" and seen["HF_TOKEN"] == "t0ken"
    shown = CliRunner().invoke(app, ["show", str(path)]).stdout
    line = next(li for li in shown.splitlines() if li.startswith("MY_SETTING="))
    seen = pasted(line[:line.index(sys.executable)], tmp_path)
    assert seen["MY_SETTING"] == "${HOME}$(touch PWNED)}" and seen["HF_TOKEN"] == "t0ken"
    assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize("written", ["/", "/etc", "/usr/", "~", "/home", "../../../../../../../.."])
def test_a_system_folder_is_no_model_folder(tmp_path, written):
    path = tmp_path / "deep" / "r.yaml"
    path.parent.mkdir()
    path.write_text(VALID.replace("path: some/model", f"path: '{written}'"))
    with pytest.raises(RecipeError) as info:
        load_recipe(path)
    [diag] = info.value.diagnostics
    assert diag.path == "model.path" and "a system folder" in diag.message
    assert (diag.file, diag.line) == (str(path), 4)
    assert "config.json" in diag.hint


def test_a_model_folder_and_a_hub_id_are_fine(tmp_path):
    (tmp_path / "models" / "tiny").mkdir(parents=True)
    for written in ("models/tiny", "org/some-model", str(tmp_path / "models" / "tiny")):
        path = tmp_path / "r.yaml"
        path.write_text(VALID.replace("path: some/model", f"path: {written}"))
        assert load_recipe(path).resolved["model"]["path"] == written
