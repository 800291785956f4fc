"""The report of a fleet run: the router named, per class and per instance, from the files
of a recorded fleet archive (two tiny vLLM CPU instances behind LiteLLM's proxy)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from model_optimizer.report import render_report
from tests.unit.report.test_report import _parse

RECORDED = Path(__file__).parent / "data" / "fleet-run"


def recorded(tmp_path: Path) -> Path:
    folder = tmp_path / "fleet-run"
    shutil.copytree(RECORDED, folder)
    return folder


def test_the_fleet_page_names_the_router_and_shows_each_class_and_instance(tmp_path):
    html = render_report(recorded(tmp_path))
    tables = _parse(html).tables
    assert tables["router"][1:] == [["name clients ask for", "tiny-llama"],
                                    ["URL during the run", "http://127.0.0.1:51689"]]
    assert "router.yaml" in _parse(html).urls
    header, *classes = tables["classes"]
    assert header[0] == "class" and header[-1] == "instance (rules)"
    assert [(row[0], row[1], row[-1]) for row in classes] == [("long", "5/5", "long"),
                                                              ("short", "11/11", "short")]
    assert classes[1][-2] == "ttft_p99_ms 2577.2 > 2000"  # the short class missed its SLO
    header, *instances = tables["instances"]
    assert header[:4] == ["instance", "classes", "served", "rules sent"]
    assert [row[:5] for row in instances] == [["short", "short", "13", "13", "0.97"],
                                              ["long", "long", "5", "5", "0.44"]]
    assert instances[0][-1].startswith("http://127.0.0.1:")
    assert "every instance served what the routing rules sent it" in html
    assert tables["throughput"][1][1].startswith("1.")  # the run's figures, as for one server


def test_a_routing_mismatch_is_shown_as_such(tmp_path):
    folder = recorded(tmp_path)
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["instances"]["long"] |= {"served": 4, "match": False}
    metrics["routing"]["problems"] = ["long served 4, the rules sent it 5"]
    (folder / "metrics.json").write_text(json.dumps(metrics))
    html = render_report(folder)
    rows = _parse(html).tables["instances"]
    assert rows[2][2] == "4 (MISMATCH)" and rows[2][3] == "5"
    assert 'class="verdict bad">routing mismatch: long served 4, the rules sent it 5' in html


def test_a_fleet_that_never_reached_the_load_says_so(tmp_path):
    folder = recorded(tmp_path)
    (folder / "metrics.json").unlink()
    html = render_report(folder)
    assert "no figures were archived" in html and "tiny-llama" in html
    assert "instances" not in _parse(html).tables
