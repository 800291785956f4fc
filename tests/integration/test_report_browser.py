"""The HTML report of a sweep in a real headless browser: it renders without a console error,
its steps table holds the archived numbers, and a screenshot is kept as a test artifact.

The sweep here runs on the mock engine (real processes, real HTTP, no vLLM) so this test costs
no vLLM launch; the probe-scan integration test renders the report of a real vLLM sweep the
same way (``tests/integration/browser.py``)."""

from __future__ import annotations

import json
import re

import pytest

import model_optimizer.engine.factory as factory
from model_optimizer.engine.factory import MockEngine
from model_optimizer.search.sweep.loop import start_sweep
from tests.integration.browser import render
from tests.unit.mock_engine import mock_recipe

pytestmark = pytest.mark.integration

SWEEP = """\
sweep:
  param: max_num_seqs
  start: 1
  max: 4
  plateau_threshold: 0.2
  max_launches: 3
  confirm_duration_s: 0
  strategy: relaunch
"""


def _cells(dom: str, table_id: str) -> list[list[str]]:
    table = re.search(rf'<table id="{table_id}">(.*?)</table>', dom, re.DOTALL)
    assert table, f"no table {table_id}"
    return [re.findall(r"<t[dh]>(.*?)</t[dh]>", row)
            for row in re.findall(r"<tr>(.*?)</tr>", table.group(1), re.DOTALL)]


def test_a_sweep_report_renders_in_chromium_with_the_archived_numbers(
        tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setattr(factory, "VllmEngine", lambda: MockEngine(ttft_ms=50, itl_ms=5,
                                                                  capacity=4))
    monkeypatch.setenv("MOPT_TEST_SECRET_TOKEN", "browser-test-secret")  # the mock recipe reads it
    outcome = start_sweep(mock_recipe(tmp_path, tiny_model_dir, SWEEP), tmp_path / "runs",
                          output=tmp_path / "next.yaml")
    assert outcome.exit_code == 0, outcome.reason
    summary = json.loads((outcome.archive / "summary.json").read_text())
    shown = render(outcome.archive / "report.html", "report-sweep-mock")
    assert shown.console_errors == []
    rows = _cells(shown.dom, "steps")[1:]
    assert [r[1] for r in rows] == [str(s["value"]) for s in summary["steps"]]
    for row, step in zip(rows, summary["steps"], strict=True):
        assert row[4].startswith(f"{step['qps']:,.2f}")
    assert "<svg" in shown.dom and shown.screenshot.stat().st_size > 10_000
