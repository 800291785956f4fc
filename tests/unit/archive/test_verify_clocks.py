"""`mopt verify` (and so `rollback --apply`) on figures taken at different SM clocks: the
rule compares the clocks both windows recorded and says so, in the verdict line, the report
and `--json`, without changing the verdict or the exit code (docs/production.md)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from model_optimizer.history.validation import Validation
from model_optimizer.history.verify_rule import Evidence, judge
from model_optimizer.runner import RunOutcome
from model_optimizer.telemetry.thermal import samples_of, window_thermals
from model_optimizer.verify import VerifyResult, report_lines, verdict_line

from .test_verify_rule import RECORDED, scaled

STEP_S = 0.5


@pytest.fixture
def recorded() -> dict:
    """A real run's metrics.json (steady window, 95% intervals)."""
    return json.loads(RECORDED.read_text())


def thermals_at(clock: int, temperature: int = 63, devices: int = 1) -> list[dict]:
    """A window's ``thermals`` record from NVML-shaped samples at ``clock`` MHz."""
    series = [{"t": 1000.0 + i * STEP_S, "gpu_thermals": [
        {"index": d, "temperature_c": temperature, "sm_clock_mhz": clock} for d in
        range(devices)]} for i in range(40)]
    return [row.to_dict() for row in window_thermals(samples_of(series), None, None)]


def on_card(metrics: dict, clock: int | None) -> dict:
    found = copy.deepcopy(metrics)
    found["thermals"] = thermals_at(clock) if clock is not None else None
    return found


def test_different_clocks_are_said_and_the_regression_stands(recorded):
    slower = scaled(recorded, rates=0.4, latencies=2.5)
    verdict = judge(Evidence(on_card(recorded, 1980)), Evidence(on_card(slower, 1755)))
    assert verdict.word == "regressed"  # the card may explain it; the deployment is slower
    assert verdict.clock_note == "taken at different clocks: SM 1980 vs 1755 MHz"
    assert verdict.to_dict()["clocks"]["same"] is False


def test_the_same_clocks_add_nothing_to_the_verdict(recorded):
    verdict = judge(Evidence(on_card(recorded, 1425)), Evidence(on_card(recorded, 1440)))
    assert verdict.word == "holds" and verdict.clocks is not None and verdict.clocks.same
    assert verdict.clock_note is None


def test_cpu_runs_have_no_clocks_to_compare(recorded):
    verdict = judge(Evidence(recorded), Evidence(copy.deepcopy(recorded)))
    assert verdict.clocks is None and verdict.to_dict()["clocks"] is None


def test_a_gpu_run_against_figures_without_clocks_says_so(recorded):
    verdict = judge(Evidence(recorded), Evidence(on_card(recorded, 1755)))
    assert verdict.word == "holds"
    assert verdict.clock_note == ("clocks not compared: the validating run recorded no SM "
                                  "clock (now SM 1755 MHz)")


def result_of(verdict, tmp_path: Path) -> VerifyResult:
    validation = Validation("20261206T000000Z-tiny-abc123", None, None, Evidence({}), None,
                            None, "0.32.0", "1x NVIDIA H200")
    outcome = RunOutcome("ok", tmp_path, "20261207T000000Z-tiny-def456")
    environment = {"vllm": "0.32.0", "hardware": "1x NVIDIA H200", "driver": "580.159.04",
                   "checkpoint": None}
    return VerifyResult("recipes/tuned.yaml", "tuned", 2, validation, environment, outcome,
                        verdict, tmp_path)


def test_verify_says_different_clocks_in_its_verdict_line_report_and_json(recorded, tmp_path):
    slower = scaled(recorded, rates=0.4, latencies=2.5)
    result = result_of(judge(Evidence(on_card(recorded, 1980)),
                             Evidence(on_card(slower, 1755))), tmp_path)
    line = verdict_line(result)
    assert line.startswith("REGRESSED on ") and line.endswith(
        "; taken at different clocks: SM 1980 vs 1755 MHz")
    assert any(text.startswith("clocks: taken at different clocks: SM 1980 vs 1755 MHz (the "
                               "verdict stands") for text in report_lines(result))
    data = result.to_dict()
    assert data["verdict"] == "regressed" and data["exit_code"] == 4
    assert data["clocks"]["text"] == "taken at different clocks: SM 1980 vs 1755 MHz"
    assert data["clocks"]["validated_sm_clock_mhz"] == {"0": 1980.0}


def test_a_hold_at_different_clocks_still_holds_and_says_so(recorded, tmp_path):
    result = result_of(judge(Evidence(on_card(recorded, 1980)),
                             Evidence(on_card(recorded, 1755))), tmp_path)
    assert result.holds and result.exit_code == 0
    assert verdict_line(result).endswith("; taken at different clocks: SM 1980 vs 1755 MHz")


def test_the_same_clocks_leave_the_verdict_line_as_it_was(recorded, tmp_path):
    result = result_of(judge(Evidence(on_card(recorded, 1440)),
                             Evidence(on_card(recorded, 1440))), tmp_path)
    line = verdict_line(result)
    assert line.startswith("HOLDS: revision 2 verified on ") and "clocks" not in line
    assert "clocks: taken at the same clocks: SM 1440 vs 1440 MHz" in report_lines(result)
