"""``usecase.route`` (what `mopt route` calls) from Python: two running mock instances by
URL, the routed revision written beside the fleet file and its exit code; what it cannot
judge refused before an eval is archived or a revision written."""

from __future__ import annotations

import re

import pytest
import yaml

from model_optimizer.errors import EXIT_OK, UsageError
from model_optimizer.fleet import load_fleet
from model_optimizer.usecase import route

from .test_route_mock import check_routed, fleet_doc, servers, write_eval_set

__all__ = ["servers"]  # the fixture: two mock servers, the fast one wrong on some math


def test_route_against_running_instances_returns_the_decision_and_writes_it(
        tmp_path, tiny_model_dir, servers):
    fast, precise = servers
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet_doc(tiny_model_dir, None), sort_keys=False))
    given, out, runs = path.read_text(), tmp_path / "routed.yaml", tmp_path / "runs"
    outcome = route(load_fleet(path), precise="precise",
                    eval_set=tmp_path / write_eval_set(tmp_path),
                    urls={"fast": fast.url, "precise": precise.url}, output=out,
                    runs_base=runs)
    assert outcome.exit_code == EXIT_OK and outcome.failure is None
    assert (outcome.fast, outcome.precise, outcome.revision) == ("fast", "precise", 2)
    assert outcome.decision.assignment() == {"general": "fast", "math": "precise"}
    assert outcome.output == out and path.read_text() == given
    check_routed(out, runs)


def test_what_route_cannot_judge_is_refused_before_anything_is_written(tmp_path,
                                                                       tiny_model_dir):
    path, runs = tmp_path / "fleet.yaml", tmp_path / "runs"
    path.write_text(yaml.safe_dump(fleet_doc(tiny_model_dir, None), sort_keys=False))
    given = path.read_text()
    eval_set = tmp_path / write_eval_set(tmp_path)
    for kwargs, message in (
            ({"fast": "fast"}, "needs an eval set"),
            ({"fast": "fast", "precise": "fast", "eval_set": eval_set}, "same instance"),
            ({"fast": "fast", "eval_set": eval_set, "urls": {"nope": "http://127.0.0.1:9"}},
             re.escape("--url nope=...: no such instance"))):
        with pytest.raises(UsageError, match=message) as refused:
            route(path, runs_base=runs, **kwargs)
        assert refused.value.exit_code == 2
    assert not runs.exists() and path.read_text() == given
