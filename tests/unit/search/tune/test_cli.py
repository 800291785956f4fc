"""`mopt tune` through typer's runner: help and the usage errors (no vLLM needed)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from model_optimizer.cli.main import app

ROOT = Path(__file__).resolve().parents[4]
TINY = str(ROOT / "recipes" / "tiny-cpu.yaml")
runner = CliRunner()


def invoke(*args, env=None):
    return runner.invoke(app, list(args), env=env)


def test_help_names_the_storage_and_resume():
    result = invoke("tune", "--help")
    assert result.exit_code == 0
    for flag in ("--storage", "--study-name", "--resume", "--n-trials", "MOPT_TUNE_STORAGE",
                 "--scan", "--no-scan", "closed-loop"):
        assert flag in result.output


def test_usage_errors_exit_2(tmp_path):
    runs = str(tmp_path / "runs")
    cases = [
        (("tune", "--runs-dir", runs), "no current recipe"),  # and none to fall back on
        (("tune", TINY, "--storage", "sqlite:///x.db", "--runs-dir", runs), "--study-name"),
        (("tune", TINY, "--resume", runs), "--resume continues"),
        (("tune", "--resume", runs), "not a resumable tune"),
        (("tune", TINY, "--sampler", "annealing", "--runs-dir", runs), "--sampler"),
        (("tune", TINY, "--set", "tune.params.max_num_seqs.low=0", "--runs-dir", runs),
         "log scale"),
        (("tune", "--resume", runs, "--no-scan"), "--resume continues"),
        (("tune", TINY, "--scan", "--set", "workload.concurrency=2", "--runs-dir", runs),
         "--scan is not valid here: workload.concurrency is set"),
        (("tune", TINY, "--set", "tune.strategy=sideways", "--runs-dir", runs),
         "tune.strategy"),
    ]
    for args, expected in cases:
        result = invoke(*args)
        assert result.exit_code == 2, (args, result.output)
        assert expected in result.output, (args, result.output)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_storage_from_the_environment_needs_a_study_name(tmp_path):
    result = invoke("tune", TINY, "--runs-dir", str(tmp_path),
                    env={"MOPT_TUNE_STORAGE": "sqlite:///shared.db"})
    assert result.exit_code == 2 and "--study-name" in result.output


def test_output_changing_knobs_need_a_quality_gate_or_the_explicit_flag(tmp_path):
    """sweep and tune refuse to keep a KV dtype on speed alone (exit 2, nothing launched)
    unless --no-quality-gate; a scheduling knob needs no gate."""
    runs = str(tmp_path / "runs")
    kv_tune = ("--set", "tune.params.kv_cache_dtype={type: categorical, choices: [auto, fp8]}")
    for args in (("sweep", TINY, "--param", "kv_cache_dtype", "--values", "auto,fp8"),
                 ("tune", TINY, *kv_tune)):
        result = invoke(*args, "--runs-dir", runs)
        assert result.exit_code == 2, (args, result.output)
        text = " ".join(result.output.split())
        assert "engine.kv_cache_dtype, which change the model's answers" in text, text
        assert "--no-quality-gate" in text
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    for flag in ("sweep", "tune", "optimize"):
        assert "--no-quality-gate" in invoke(flag, "--help").output
