"""`mopt plan FLEET` through the command line: the table, the verdict, the exit code."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from model_optimizer.cli.main import app

from .conftest import ROOT, SHIPPED, gpu_fleet

LLAMA = str(ROOT / "examples" / "llama-2-7b-config.json")


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def test_plan_of_a_fleet_that_fits_prints_every_instance_and_exits_0():
    result = invoke("plan", SHIPPED)
    assert result.exit_code == 0, result.output
    assert "plan: fleet tiny-cpu-fleet (2 instances)" in result.output
    assert "verdict: fits: sequences held without preemption: short" in result.output


def test_plan_of_a_fleet_that_does_not_fit_exits_1_with_the_reason(write_fleet):
    path = write_fleet(gpu_fleet((0.3, 0.7), ("gptq", "none")))
    result = invoke("plan", path, "--model-config", LLAMA)
    assert result.exit_code == 1
    assert "does NOT fit" in result.output and "verdict: does not fit:" in result.output
    data = json.loads(invoke("plan", path, "--model-config", LLAMA, "--json").output)
    assert data["fits"] is False and [i["name"] for i in data["instances"]] == ["a", "b"]
    assert data["instances"][1]["plan"]["weight_bytes"] > 3 * data["instances"][0]["plan"][
        "weight_bytes"]


def test_plan_of_a_broken_fleet_is_a_usage_error_with_the_location(write_fleet):
    path = write_fleet(gpu_fleet((0.6, 0.6)))
    result = invoke("plan", path, "--model-config", LLAMA)
    assert result.exit_code == 2
    assert f"{path}:" in result.output and "add up to 1.20" in result.output


def test_validate_checks_a_fleet_beside_recipes(write_fleet):
    result = invoke("validate", SHIPPED, ROOT / "recipes" / "tiny-cpu.yaml")
    assert result.exit_code == 0, result.output
    assert "(fleet tiny-cpu-fleet, revision 1)" in result.output
    broken = write_fleet(gpu_fleet((0.6, 0.6)))
    result = invoke("validate", broken)
    assert result.exit_code == 2 and "add up to 1.20" in result.output
