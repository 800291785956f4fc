"""Each command's success and error output through typer's runner (no vLLM needed)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from model_optimizer import __version__
from model_optimizer.cli.main import app

ROOT = Path(__file__).resolve().parents[3]
TINY = str(ROOT / "recipes" / "tiny-cpu.yaml")
A10 = str(ROOT / "recipes" / "7b-int4-a10.yaml")
LLAMA2 = str(ROOT / "examples" / "llama-2-7b-config.json")
runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, list(args))


def test_version_and_help():
    assert invoke("--version").output.strip() == f"mopt {__version__}"
    for command in ("validate", "show", "plan", "apply", "bench", "tiny-model"):
        result = invoke(command, "--help")
        assert result.exit_code == 0 and "Usage: " in result.output


def test_validate_ok_and_json():
    result = invoke("validate", TINY, A10)
    assert result.exit_code == 0
    assert "ok  " in result.output and "tiny-cpu, revision 1" in result.output
    data = json.loads(invoke("validate", TINY, "--json").output)
    assert data["ok"] is True and data["recipes"][0]["name"] == "tiny-cpu"


def test_validate_reports_errors_as_json(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path(TINY).read_text().replace("max_num_seqs: 8", "max_num_seqs: eight"))
    result = invoke("validate", str(bad), TINY, "--json")
    assert result.exit_code == 2
    data = json.loads(result.output)
    assert data["ok"] is False
    [error] = data["recipes"][0]["errors"]
    assert error["path"] == "engine.max_num_seqs" and error["line"] == 17
    assert data["recipes"][1]["ok"] is True


def test_validate_bad_override_exit_2():
    result = invoke("validate", TINY, "--set", "engine.max_num_seqs=-3")
    assert result.exit_code == 2
    assert "--set engine.max_num_seqs=-3: engine.max_num_seqs: must be >= 1" in result.output


def test_show_prints_resolved_recipe_argv_and_writes_config(tmp_path):
    out = tmp_path / "vllm.yaml"
    result = invoke("show", TINY, "--set", "engine.max_num_seqs=16", "--vllm-config", str(out))
    assert result.exit_code == 0, result.output
    assert "gpu_memory_utilization: 0.9" in result.output  # defaults filled in
    assert "VLLM_CPU_KVCACHE_SPACE=1 " in result.output
    assert "-m vllm.entrypoints.openai.api_server" in result.output
    assert "--max-num-seqs 16" in result.output
    assert yaml.safe_load(out.read_text())["max-num-seqs"] == 16


def test_show_json_and_bad_config_name(tmp_path):
    data = json.loads(invoke("show", A10, "--json").output)
    assert data["vllm_config"]["quantization"] == "gptq"
    assert data["argv"][data["argv"].index("--kv-cache-dtype") + 1] == "fp8"
    result = invoke("show", TINY, "--vllm-config", str(tmp_path / "x.json"))
    assert result.exit_code == 2 and "yaml" in result.output
    assert not (tmp_path / "x.json").exists()


def test_plan_table_and_json():
    result = invoke("plan", A10, "--model-config", LLAMA2)
    assert result.exit_code == 0, result.output
    assert "6,738,415,616" in result.output and "verdict: fits" in result.output
    data = json.loads(invoke("plan", A10, "--model-config", LLAMA2, "--json").output)
    assert data["kv_bytes_per_token"] == 2 * 32 * 32 * 128 * 1  # fp8 KV cache
    assert data["verdict"] == "fits"


def test_plan_without_model_config_is_a_usage_error():
    result = invoke("plan", A10)
    assert result.exit_code == 2
    assert "--model-config" in result.output and "Traceback" not in result.output


def test_plan_that_does_not_fit_exits_1():
    result = invoke("plan", A10, "--model-config", LLAMA2, "--set", "model.quantization=none",
                    "--set", "model.dtype=float32")
    assert result.exit_code == 1
    assert "does not fit" in result.output


def test_apply_with_missing_model_is_a_usage_error(tmp_path):
    result = invoke("apply", TINY, "--set", "model.path=./no-such-model",
                    "--runs-dir", str(tmp_path / "runs"))
    assert result.exit_code == 2
    assert "no config.json" in result.output
    assert not (tmp_path / "runs").exists()  # nothing archived for bad input


@pytest.mark.parametrize("args", [["--url", "http://127.0.0.1:9", "--tokenizer", "x"]])
def test_bench_dead_server(args, tmp_path):
    result = invoke("bench", *args, "--runs-dir", str(tmp_path))
    assert result.exit_code == 2
    assert "does not answer /v1/models" in result.output
    assert list(tmp_path.iterdir()) == []


def test_unknown_option_is_exit_2():
    assert invoke("show", TINY, "--bogus").exit_code == 2


def test_the_command_starts_without_the_heavy_libraries():
    """Every `mopt` call (tab completion included) imports the CLI; scipy.stats alone took
    0.9 of its 2.2 s. The libraries a command needs are imported when it runs."""
    code = ("import sys, model_optimizer.cli.main; print(sorted(m for m in "
            "('scipy', 'scipy.stats', 'optuna', 'torch', 'vllm', 'transformers') "
            "if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
