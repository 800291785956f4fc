"""Drift: a validated recipe meets another vLLM or other hardware."""

import pytest
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.history import drift
from model_optimizer.recipe import load_recipe

from .fakes import FakeOutcome, make_run, tiny_recipe

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



def test_a_different_gpu_driver_is_drift(validated_recipe):
    resolved = load_recipe(validated_recipe).resolved
    resolved["validated"]["driver"] = "550.54.15"
    messages = drift.drift_messages(resolved, "0.31.0", "Some Other CPU", "580.159.04")
    assert messages == [f"recipe tiny-cpu revision 1 was validated (run "
                        f"{resolved['validated']['run_id']}) with GPU driver 550.54.15; "
                        "this machine: 580.159.04"]
    assert "this machine: none" in drift.drift_messages(resolved, "0.31.0", None, None)[0]
    assert drift.drift_messages(resolved, "0.31.0", None, "550.54.15") == []


def test_the_environment_names_the_driver_the_probe_gives(monkeypatch, validated_recipe):
    class Probe:
        def driver_version(self):
            return "580.159.04"

        def close(self):
            pass

    monkeypatch.setattr("model_optimizer.telemetry.NvmlProbe", Probe)
    loaded = load_recipe(validated_recipe)
    environment = drift.environment_here(loaded.resolved, loaded.base_dir)
    assert environment["driver"] == "580.159.04"
    assert environment["vllm"] == drift.vllm_version()
    assert environment["checkpoint"] is None  # the recipe pins no checkpoint


def test_strict_accepts_drift_once_a_verification_here_held(tmp_path, monkeypatch):
    """A new vLLM here: --strict refuses, `mopt verify` holds, --strict accepts; a later
    verification that regressed refuses again (the latest here decides)."""
    from model_optimizer.history.rollback import rollback
    from model_optimizer.verify import verify

    recipe = tiny_recipe(tmp_path)
    runs = tmp_path / "runs"
    rollback(make_run(runs, recipe).name, runs)  # revision 2, validated by that run
    monkeypatch.setattr(drift, "vllm_version", lambda: "0.99.0")
    loaded = load_recipe(recipe)
    with pytest.raises(drift.DriftError, match="run `mopt verify`"):
        drift.check_drift(loaded.resolved, strict=True, base_dir=loaded.base_dir,
                          runs_base=runs)

    def measured(tpot_ms):
        return lambda loaded, base, **kw: FakeOutcome(make_run(base, loaded.path, seed=5,
                                                               tpot_ms=tpot_ms))

    monkeypatch.setattr("model_optimizer.verify.run_recipe", measured(10.0))
    held = verify(loaded, runs)
    assert held.holds and held.environment["vllm"] == "0.99.0"
    messages = drift.check_drift(loaded.resolved, strict=True, base_dir=loaded.base_dir,
                                 runs_base=runs)
    assert messages[-1].startswith("verified on vLLM 0.99.0")
    assert messages[-1].endswith(f"holds ({held.archive.name}) (so --strict accepts it)")
    monkeypatch.setattr("model_optimizer.verify.run_recipe", measured(30.0))
    regressed = verify(loaded, runs)
    assert regressed.exit_code == 4 and "tpot_p50_ms" in regressed.to_dict()["regressed"]
    with pytest.raises(drift.DriftError, match="regressed"):
        drift.check_drift(loaded.resolved, strict=True, base_dir=loaded.base_dir,
                          runs_base=runs)
