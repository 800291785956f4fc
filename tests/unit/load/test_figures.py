"""The figures type: a recorded metrics.json reads and writes back identical."""

import json
from pathlib import Path

import pytest

from model_optimizer.load.classes import figure
from model_optimizer.load.figures import FIGURE_KEYS, Figures, Interval
from model_optimizer.search.measure import FIGURE_KEYS as MEASURE_FIGURE_KEYS

RECORDED = sorted((Path(__file__).resolve().parents[2] / "data" / "metrics").glob("*.json"))


def test_there_are_recorded_metrics():
    assert {p.name for p in RECORDED} >= {"steady-intervals.json", "classes.json",
                                          "nothing-completed.json"}


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
def test_recorded_metrics_round_trip_identical(path):
    text = path.read_text()
    data = json.loads(text)
    figures = Figures.from_dict(data)
    assert figures.to_dict() == data
    assert json.dumps(figures.to_dict(), indent=2) == json.dumps(data, indent=2)
    assert not figures.extra  # every key of today's format is a typed field


def test_typed_fields_read_the_recorded_values():
    data = json.loads((RECORDED[0].parent / "steady-intervals.json").read_text())
    figures = Figures.from_dict(data)
    assert figures.qps == data["qps"] and figures.completed == data["completed"]
    qps = figures.interval("qps")
    assert isinstance(qps, Interval) and qps.half_width == data["intervals"]["qps"]["half_width"]
    assert str(qps) == f"{qps.value:.4g} ± {qps.half_width:.2g}"
    assert figures.steady["drain_requests"] == data["steady"]["drain_requests"]
    assert figures.compared() == {k: data.get(k) for k in FIGURE_KEYS}


def test_class_figures_and_class_keys():
    data = json.loads((RECORDED[0].parent / "classes.json").read_text())
    figures = Figures.from_dict(data)
    assert set(figures.classes) == {"long", "short"}
    short = data["classes"]["short"]
    assert figures.figure("short:goodput_qps") == short["goodput_qps"] == figure(
        data, "short:goodput_qps")
    assert figures.figure("nope:qps") is None and figures.figure("unknown_key") is None
    assert figures.interval("qps") is None and figures.half_width("qps") is None


def test_unknown_keys_are_kept_in_order():
    data = {"zeta": 1, "qps": 2.5, "new_figure": {"a": [1]}, "completed": 3}
    figures = Figures.from_dict(data)
    assert figures.extra == {"zeta": 1, "new_figure": {"a": [1]}}
    assert list(figures.to_dict()) == list(data) and figures.to_dict() == data
    assert figures.figure("new_figure") == {"a": [1]}


def test_one_list_of_figure_keys():
    assert MEASURE_FIGURE_KEYS is FIGURE_KEYS

