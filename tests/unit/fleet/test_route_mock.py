"""`mopt route FLEET` on the mock engine: both instances launched from the fleet (the mock
answering from a script per instance), each evaluated, the gate judged per class, and the
next fleet revision written with the routes from the decision and the figures beside them.
The fast instance answers the arithmetic class wrongly half the time: that class goes to
the precise instance, the general one stays on the fast instance."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

import model_optimizer.engine.factory as factory
from model_optimizer.cli.main import app
from model_optimizer.engine.factory import MockEngine
from model_optimizer.fleet import load_fleet
from model_optimizer.load.mock_server import MockServer
from tests.unit.mock_engine import alive, children_pids

from .conftest import INLINE_ENGINE

GENERAL = [("The capital of France is", "Paris"), ("The opposite of hot is", "cold"),
           ("There are seven days in a", "week"), ("On a clear day the sky is", "blue"),
           ("The sun rises in the", "east"), ("Water freezes into", "ice"),
           ("The plural of mouse is", "mice"), ("The month after May is", "June")]
MATH = [(f"Question: What is {a} + {b}?\nAnswer:", str(a + b))
        for a, b in ((2, 3), (12, 9), (10, 4), (6, 7), (20, 5), (9, 9), (25, 25), (4, 8))]
MATH_WRONG_ON_FAST = {MATH[1][0], MATH[3][0], MATH[5][0], MATH[6][0]}


def write_eval_set(folder) -> str:
    lines = [{"id": f"general-{n}", "class": "general", "prompt": p, "reference": r,
              "scorer": "contains"} for n, (p, r) in enumerate(GENERAL)]
    lines += [{"id": f"math-{n}", "class": "math", "prompt": p, "reference": r,
               "scorer": "number"} for n, (p, r) in enumerate(MATH)]
    (folder / "classes.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return "classes.jsonl"


def answers(fast: bool) -> dict[str, str]:
    out = {p: f" {r}, of course." for p, r in GENERAL}
    out.update({p: (" 1000" if fast and p in MATH_WRONG_ON_FAST else f" {r}") for p, r in MATH})
    return out


def fleet_doc(model_dir, eval_set: str | None) -> dict:
    def inline(served, core):
        return {"model": {"path": str(model_dir), "served_name": served},
                "engine": dict(INLINE_ENGINE), "kv_cache_gib": 1, "cores": [core]}
    doc = {"kind": "fleet", "fleet_version": 1, "name": "prec",
           "hardware": {"accelerator": "cpu", "memory_gib": 4},
           "instances": {"fast": inline("m-fast", 0), "precise": inline("m-precise", 1)},
           "router": {"model": "m", "fallback": "precise", "routes": [
               {"class": "general", "to": "fast", "tag": "general"},
               {"class": "math", "to": "fast", "tag": "math"}]},
           "workload": {"mix": {c: {"weight": 1, "prompt_tokens": 16, "output_tokens": 8}
                                for c in ("general", "math")}, "num_requests": 8}}
    quality = {"thresholds": {"max_accuracy_drop": 0.1}, "max_tokens": 8}
    if eval_set is not None:
        quality["eval_set"] = eval_set
    doc["quality"] = quality
    return doc


def check_routed(path, runs) -> dict:
    fleet = load_fleet(path)
    assert fleet.resolved["revision"] == 2
    assert {r.request_class: r.to for r in fleet.router.routes} == {"general": "fast",
                                                                  "math": "precise"}
    evidence = fleet.resolved["routing_evidence"]
    math, general = evidence["classes"]["math"], evidence["classes"]["general"]
    assert (math["verdict"], math["items"]) == ("failed", 8)
    assert math["figures"]["baseline_accuracy"] == 1.0
    assert math["figures"]["accuracy"] == 1 - len(MATH_WRONG_ON_FAST) / len(MATH)
    assert "accuracy 1.000 -> 0.500" in math["reason"]
    assert general["verdict"] == "passed" and general["figures"]["accuracy_drop"] == 0.0
    assert evidence["thresholds"] == {"max_accuracy_drop": 0.1}
    evals = sorted(p.name for p in runs.iterdir() if p.is_dir())
    assert len(evals) == 2 and {evidence["reference_run"], evidence["candidate_run"]} <= {
        json.loads((runs / e / "status.json").read_text())["id"] for e in evals}
    return evidence


def test_route_launches_both_instances_and_writes_the_routed_revision(
        tmp_path, tiny_model_dir, monkeypatch):
    scripts = []
    for name, fast in (("m-fast", True), ("m-precise", False)):
        file = tmp_path / f"{name}.json"
        file.write_text(json.dumps(answers(fast)))
        scripts.append((name, str(file)))
    monkeypatch.setattr(factory, "VllmEngine", lambda: MockEngine(answers=tuple(scripts)))
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet_doc(tiny_model_dir, write_eval_set(tmp_path)),
                                   sort_keys=False))
    before, runs = children_pids(), tmp_path / "runs"
    result = CliRunner().invoke(app, ["route", str(path), "--fast", "fast",
                                      "--runs-dir", str(runs)])
    assert result.exit_code == 0, result.output
    assert "math -> precise: quality gate failed on the fast instance" in result.output
    assert "wrote revision 2 of the fleet" in result.output
    check_routed(path, runs)
    assert not alive(children_pids() - before)  # both servers stopped


@pytest.fixture
def servers():
    fast = MockServer(model="m-fast", answers=answers(True)).start()
    precise = MockServer(model="m-precise", answers=answers(False)).start()
    yield fast, precise
    fast.stop()
    precise.stop()


def test_route_against_running_instances_by_url(tmp_path, tiny_model_dir, servers):
    fast, precise = servers
    eval_set = tmp_path / write_eval_set(tmp_path)
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet_doc(tiny_model_dir, None), sort_keys=False))
    out, runs = tmp_path / "routed.yaml", tmp_path / "runs"
    result = CliRunner().invoke(app, [
        "route", str(path), "--precise", "precise", "--eval-set", str(eval_set),
        "--url", f"fast={fast.url}", "--url", f"precise={precise.url}",
        "--output", str(out), "--runs-dir", str(runs), "--json"])
    assert result.exit_code == 0, result.output
    printed = json.loads(result.stdout)
    assert printed["revision"] == 2 and printed["output"] == str(out)
    assert printed["gates"]["math"]["gate"]["passed"] is False
    evidence = check_routed(out, runs)
    assert evidence["eval_set"] == str(eval_set)
    assert "routing_evidence" not in path.read_text()  # the given file is untouched
    assert fast.counters.requests == precise.counters.requests == 16


def test_route_refuses_what_it_cannot_judge(tmp_path, tiny_model_dir):
    path = tmp_path / "fleet.yaml"
    doc = fleet_doc(tiny_model_dir, None)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    runner = CliRunner()
    no_set = runner.invoke(app, ["route", str(path), "--fast", "fast"])
    assert no_set.exit_code == 2 and "needs an eval set" in no_set.output
    both = runner.invoke(app, ["route", str(path), "--fast", "fast", "--precise", "fast"])
    assert both.exit_code == 2 and "same instance" in both.output
    bad_url = runner.invoke(app, ["route", str(path), "--fast", "fast", "--url", "nope"])
    assert bad_url.exit_code == 2 and "INSTANCE=URL" in bad_url.output
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("recipe_version: 1\nname: r\n")
    not_fleet = runner.invoke(app, ["route", str(recipe)])
    assert not_fleet.exit_code == 2 and "not a fleet" in not_fleet.output


def test_an_instance_that_does_not_start_writes_nothing_and_exits_3(tmp_path, tiny_model_dir,
                                                                   monkeypatch):
    monkeypatch.setattr(factory, "VllmEngine", lambda: MockEngine(
        fail_start="torch.OutOfMemoryError: CUDA out of memory"))
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump(fleet_doc(tiny_model_dir, write_eval_set(tmp_path)),
                                   sort_keys=False))
    given = path.read_text()
    result = CliRunner().invoke(app, ["route", str(path), "--fast", "fast", "--runs-dir",
                                      str(tmp_path / "runs"), "--json"])
    assert result.exit_code == 3, result.output
    printed = json.loads(result.stdout)
    assert printed["failure"].startswith("the precise instance's eval failed")
    assert printed["revision"] is None and printed["candidate_run"] is None
    assert path.read_text() == given
