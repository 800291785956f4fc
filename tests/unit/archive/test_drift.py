"""Drift: a validated recipe meets another vLLM or other hardware."""

import pytest
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.history import drift
from model_optimizer.recipe import load_recipe

from .fakes import tiny_recipe

VALIDATED = """
validated:
  at: '2026-01-01T00:00:00Z'
  run_id: 20260101T000000Z-tiny-cpu-abcdef
  by: sweep
  vllm_version: 0.31.0
  hardware: Some Other CPU
"""


@pytest.fixture
def validated_recipe(tmp_path):
    path = tiny_recipe(tmp_path)
    path.write_text(path.read_text() + VALIDATED)
    return path


def test_messages_name_both_sides(validated_recipe):
    resolved = load_recipe(validated_recipe).resolved
    messages = drift.drift_messages(resolved, "0.32.0", "Test CPU")
    assert len(messages) == 2
    assert "vLLM 0.31.0; installed here: 0.32.0" in messages[0]
    assert "on Some Other CPU; this machine: Test CPU" in messages[1]
    assert drift.drift_messages(resolved, "0.31.0", "Some Other CPU") == []


def test_no_validated_block_means_no_drift(tmp_path):
    assert drift.check_drift(load_recipe(tiny_recipe(tmp_path)).resolved, strict=True) == []


def test_strict_raises(validated_recipe, monkeypatch):
    monkeypatch.setattr(drift, "vllm_version", lambda: "0.32.0")
    monkeypatch.setattr(drift, "current_hardware", lambda: "Some Other CPU")
    resolved = load_recipe(validated_recipe).resolved
    assert len(drift.check_drift(resolved)) == 1
    with pytest.raises(drift.DriftError, match="--strict"):
        drift.check_drift(resolved, strict=True)


def test_current_hardware_is_the_sweep_label():
    from model_optimizer.telemetry import hardware_label, hardware_seen

    assert drift.current_hardware() == hardware_label(hardware_seen())


def test_apply_strict_refuses_before_anything_runs(validated_recipe, tmp_path, monkeypatch):
    monkeypatch.setattr(drift, "vllm_version", lambda: "0.32.0")
    runs = tmp_path / "runs"
    result = CliRunner().invoke(app, ["apply", str(validated_recipe), "--strict",
                                      "--runs-dir", str(runs)])
    assert result.exit_code == 2
    assert "vLLM 0.31.0" in result.output and "--strict" in result.output
    assert not runs.exists()
