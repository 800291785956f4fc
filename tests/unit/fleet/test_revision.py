"""Writing a precision-routed fleet revision: the routes' instances from the decision, the
figures beside them, comments kept, the table checked against its evidence when loaded."""

from __future__ import annotations

import pytest
import yaml

from model_optimizer.errors import RecipeError, UsageError
from model_optimizer.fleet import load_fleet
from model_optimizer.fleet.revision import EVIDENCE, write_routing

from .conftest import cpu_fleet


def precision_fleet() -> dict:
    """A fast and a precise instance, two tagged classes and a length-free fallback."""
    doc = cpu_fleet()
    doc["instances"] = {"fast": doc["instances"]["short"], "precise": doc["instances"]["long"]}
    doc["router"] = {"model": "m", "fallback": "precise", "routes": [
        {"class": "short", "to": "fast", "tag": "chat"},
        {"class": "long", "to": "fast", "tag": "docs"}]}
    return doc


def evidence(assignment: dict[str, str]) -> dict:
    return {"fast": "fast", "precise": "precise", "min_items": 8,
            "classes": {c: {"to": to, "verdict": "passed" if to == "fast" else "failed",
                            "reason": "r", "items": 8, "scored": 8,
                            "figures": {"accuracy_drop": 0.5}, "checks": []}
                        for c, to in assignment.items()}}


@pytest.fixture
def fleet_file(tmp_path):
    path = tmp_path / "fleet.yaml"
    text = yaml.safe_dump(precision_fleet(), sort_keys=False)
    path.write_text("# my fleet, routed by quality\n" + text.replace(
        "  fallback: precise\n", "  fallback: precise  # what no rule claims\n"))
    return path


def test_the_revision_routes_as_decided_with_the_figures_beside(fleet_file):
    fleet = load_fleet(fleet_file)
    decided = {"short": "fast", "long": "precise"}
    path, number, text = write_routing(fleet, decided, evidence(decided))
    assert (path, number) == (fleet_file, 2)
    assert text.startswith("# my fleet, routed by quality\n")
    assert "fallback: precise  # what no rule claims" in text
    again = load_fleet(fleet_file)
    assert again.resolved["revision"] == 2
    assert {r.request_class: r.to for r in again.router.routes} == decided
    assert again.resolved[EVIDENCE]["classes"]["long"]["figures"]["accuracy_drop"] == 0.5
    assert again.router.fallback == "precise"
    assert [r.tag for r in again.router.routes] == ["chat", "docs"]  # recognition kept
    assert again.instances["precise"].classes == ("long",)


def test_a_second_routing_replaces_the_evidence_and_counts_on(fleet_file):
    first = {"short": "fast", "long": "precise"}
    write_routing(load_fleet(fleet_file), first, evidence(first))
    second = {"short": "precise", "long": "precise"}
    _, number, text = write_routing(load_fleet(fleet_file), second, evidence(second))
    assert number == 3 and text.count(f"{EVIDENCE}:") == 1
    assert {r.to for r in load_fleet(fleet_file).router.routes} == {"precise"}


def test_a_routing_table_edited_by_hand_is_refused_at_its_line(fleet_file):
    decided = {"short": "fast", "long": "precise"}
    write_routing(load_fleet(fleet_file), decided, evidence(decided))
    edited = fleet_file.read_text().replace("to: precise\n    tag: docs", "to: fast\n    tag: docs")
    assert edited != fleet_file.read_text()
    fleet_file.write_text(edited)
    number = next(n for n, line in enumerate(edited.splitlines(), start=1)
                  if line.strip() == "tag: docs") - 1  # the `to:` line above it
    with pytest.raises(RecipeError) as caught:
        load_fleet(fleet_file)
    text = str(caught.value)
    assert "class 'long' goes to 'fast' here, but routing_evidence routes it to 'precise'" \
        in text
    assert f"fleet.yaml:{number}:" in text
    assert "run `mopt route` again" in text


def test_a_class_that_relies_on_the_fallback_cannot_be_moved_off_it(fleet_file):
    doc = precision_fleet()
    doc["router"]["routes"][1] = {"class": "long", "to": "precise"}  # no tag: the fallback
    fleet_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    fleet = load_fleet(fleet_file)
    decided = {"short": "fast", "long": "fast"}
    with pytest.raises(UsageError, match="class 'long' has no rule the router recognizes"):
        write_routing(fleet, decided, evidence(decided))
    assert "routing_evidence" not in fleet_file.read_text()  # nothing written
    kept = {"short": "fast", "long": "precise"}
    _, number, _ = write_routing(fleet, kept, evidence(kept))
    assert number == 2


def test_evidence_naming_an_instance_the_fleet_lacks_is_refused(fleet_file, tmp_path):
    doc = precision_fleet()
    doc[EVIDENCE] = evidence({"short": "fast", "long": "fast"})
    doc[EVIDENCE]["precise"] = "gone"
    fleet_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(RecipeError, match="routing_evidence.precise: no instance 'gone'"):
        load_fleet(fleet_file)
