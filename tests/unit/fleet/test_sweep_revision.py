"""Writing a swept fleet revision on recorded sweep outcomes: each instance's max_num_seqs
where it belongs (an inline engine, a member recipe's ``set:``), the evidence beside it,
comments kept, the revision counted on, a hand edit refused at its line; the schema of the
block; the instance as the fleet serves it round-tripped by the sweep's own writer."""

from __future__ import annotations

import re

import pytest
import yaml

from model_optimizer.errors import RecipeError, UsageError
from model_optimizer.fleet import load_fleet
from model_optimizer.fleet.rules import SWEEP_EVIDENCE
from model_optimizer.fleet.sweep_revision import InstanceSweep, sweepable, write_sweeps
from model_optimizer.recipe import Variation
from model_optimizer.recipe.overrides import parse_override
from model_optimizer.recipe.writer import write_revision

from .conftest import INLINE_ENGINE, cpu_fleet

MEMBER = {"recipe_version": 1, "name": "member", "model": {"path": "m", "served_name": "m-short"},
          "engine": dict(INLINE_ENGINE)}
KNEE = {"resolved": True, "value": 8, "band": [6, 10], "share_low": 0.02, "windows": 5}


def swept(name: str, value: int | None, resolved: bool = True) -> InstanceSweep:
    return InstanceSweep(name, f"sweep-{name}", value, resolved, reason=f"{name} chose {value}",
                         figures={"qps": 3.5, "ttft_p99_ms": 120.0}, knee=KNEE)


def fleet_text(set_line: str | None = "    set: [engine.max_num_seqs=16]  # as given\n") -> str:
    doc = cpu_fleet()
    doc["instances"]["short"] = {"recipe": "member.yaml", "kv_cache_gib": 1, "cores": [0]}
    text = "# a fleet, swept\n" + yaml.safe_dump(doc, sort_keys=False)
    assert text.count("      max_num_seqs: 4\n") == 1  # the inline one (long)
    text = text.replace("      max_num_seqs: 4\n", "      max_num_seqs: 4   # the long one\n")
    if set_line:
        text = text.replace("    recipe: member.yaml\n", "    recipe: member.yaml\n" + set_line)
    return text


@pytest.fixture
def fleet_file(tmp_path):
    (tmp_path / "member.yaml").write_text("# the member\n" + yaml.safe_dump(MEMBER))
    path = tmp_path / "fleet.yaml"
    path.write_text(fleet_text())
    return path


def test_each_value_goes_where_the_fleet_sets_it_with_the_evidence_beside(fleet_file):
    member_before = (fleet_file.parent / "member.yaml").read_text()
    fleet = load_fleet(fleet_file)
    path, number, text = write_sweeps(fleet, [swept("short", 8), swept("long", 2, False)],
                                      "f-sweep-1")
    assert (path, number) == (fleet_file, 2)
    assert text.startswith("# a fleet, swept\n")
    assert re.search(r"\n    set: \[engine.max_num_seqs=8\] +# as given\n", text)  # in place
    assert "      max_num_seqs: 2   # the long one\n" in text
    assert (fleet_file.parent / "member.yaml").read_text() == member_before  # not rewritten
    again = load_fleet(fleet_file)
    assert again.resolved["revision"] == 2
    served = {n: i.recipe.spec.engine.max_num_seqs for n, i in again.instances.items()}
    assert served == {"short": 8, "long": 2}
    evidence = again.resolved[SWEEP_EVIDENCE]
    assert evidence["run_id"] == "f-sweep-1" and evidence["measured_at"]
    assert evidence["instances"]["short"] == {
        "run_id": "sweep-short", "value": 8, "resolved": True, "reason": "short chose 8",
        "figures": {"qps": 3.5, "ttft_p99_ms": 120.0}, "knee": KNEE}
    assert evidence["instances"]["long"]["resolved"] is False  # written, not resolved


def test_a_second_sweep_replaces_the_evidence_and_counts_on(fleet_file):
    write_sweeps(load_fleet(fleet_file), [swept("short", 8), swept("long", 2)], "one")
    _, number, text = write_sweeps(load_fleet(fleet_file), [swept("short", 4),
                                                            swept("long", 8)], "two")
    assert number == 3 and text.count(f"{SWEEP_EVIDENCE}:") == 1
    assert load_fleet(fleet_file).resolved[SWEEP_EVIDENCE]["run_id"] == "two"


@pytest.mark.parametrize(("set_line", "expected"), [
    (None, ["engine.max_num_seqs=8"]),
    ("    set: [engine.max_model_len=1024]\n",
     ["engine.max_model_len=1024", "engine.max_num_seqs=8"]),
    ("    set: [engine.max_num_seqs=2, engine.max_model_len=1024, engine.max_num_seqs=3]\n",
     ["engine.max_num_seqs=8", "engine.max_model_len=1024"]),
])
def test_a_member_set_entry_is_added_or_replaced_once(fleet_file, set_line, expected):
    fleet_file.write_text(fleet_text(set_line))
    _, _, text = write_sweeps(load_fleet(fleet_file), [swept("short", 8), swept("long", 4)],
                              "x")
    assert yaml.safe_load(text)["instances"]["short"]["set"] == expected
    assert load_fleet(fleet_file).instances["short"].recipe.spec.engine.max_num_seqs == 8


def test_an_instance_edited_by_hand_after_its_sweep_is_refused_at_its_line(fleet_file):
    write_sweeps(load_fleet(fleet_file), [swept("short", 8), swept("long", 2)], "x")
    edited = fleet_file.read_text().replace("max_num_seqs: 2   # the long one",
                                            "max_num_seqs: 6   # the long one")
    fleet_file.write_text(edited)
    number = next(n for n, line in enumerate(edited.splitlines(), start=1)
                  if "# the long one" in line)
    with pytest.raises(RecipeError) as caught:
        load_fleet(fleet_file)
    text = str(caught.value)
    assert f"fleet.yaml:{number}:" in text
    assert "instance 'long': serves max_num_seqs 6 here, but sweep_evidence chose 2" in text
    assert "run `mopt split FLEET --sweep-instances` again" in text


def test_a_member_file_edited_after_its_sweep_is_refused_in_the_member(fleet_file):
    fleet_file.write_text(fleet_text(None))  # the value lives in the member file itself
    write_sweeps(load_fleet(fleet_file), [swept("short", 8), swept("long", 4)], "x")
    text = fleet_file.read_text()
    assert "    set: [engine.max_num_seqs=8]\n" in text  # added, as a flow list
    fleet_file.write_text(text.replace("    set: [engine.max_num_seqs=8]\n", ""))
    with pytest.raises(RecipeError, match=r"member\.yaml:\d+:.*serves max_num_seqs 4 here, "
                                          "but sweep_evidence chose 8"):
        load_fleet(fleet_file)


def test_evidence_naming_an_instance_the_fleet_lacks_is_refused(fleet_file):
    doc = yaml.safe_load(fleet_file.read_text())
    doc[SWEEP_EVIDENCE] = {"instances": {"shrot": swept("short", 16).evidence()}}
    fleet_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(RecipeError, match="sweep_evidence.instances.shrot: no instance "
                                          "'shrot' .*did you mean 'short'"):
        load_fleet(fleet_file)


@pytest.mark.parametrize(("entry", "message"), [
    ({"run_id": "s", "resolved": True}, "missing required key 'value'"),
    ({"run_id": "s", "value": "8", "resolved": True}, "sweep_evidence.instances.short.value"),
    ({"run_id": "s", "value": 16, "resolved": "yes"}, "sweep_evidence.instances.short.resolved"),
    ({"run_id": "s", "value": 16, "resolved": True, "extra": 1}, "extra"),
])
def test_the_schema_refuses_a_malformed_block(fleet_file, entry, message):
    doc = yaml.safe_load(fleet_file.read_text())
    doc[SWEEP_EVIDENCE] = {"instances": {"short": entry}}
    fleet_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(RecipeError, match=message):
        load_fleet(fleet_file)


def test_the_schema_accepts_the_block_and_keeps_format_1(fleet_file):
    doc = yaml.safe_load(fleet_file.read_text())
    doc[SWEEP_EVIDENCE] = {"run_id": "e", "instances": {"short": swept("short", 16).evidence()}}
    fleet_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert load_fleet(fleet_file).resolved["fleet_version"] == 1


def test_a_sweep_that_chose_nothing_writes_no_revision(fleet_file):
    before = fleet_file.read_text()
    with pytest.raises(UsageError, match=r"\['long'\] have no value chosen"):
        write_sweeps(load_fleet(fleet_file), [swept("short", 8), swept("long", None)], "x")
    assert fleet_file.read_text() == before


def test_the_instance_as_served_is_what_the_sweep_varies_and_round_trips(fleet_file, tmp_path):
    fleet = load_fleet(fleet_file)
    for name in ("short", "long"):
        loaded = sweepable(fleet, name)
        step = loaded.varied({"engine.max_num_seqs": 2}, "sweep value 2")
        served = fleet.instances[name].recipe.resolved
        assert {**step.resolved, "engine": {**step.resolved["engine"], "max_num_seqs": 4}} \
            == {**served, "engine": {**served["engine"], "max_num_seqs": 4}}
        assert step.resolved["hardware"]["placement"] == served["hardware"]["placement"]
        assert list(step.resolved["workload"]["mix"]) == [name]  # its own class only
        out = tmp_path / f"instance.{name}.yaml"
        text = write_revision(loaded, {("engine", "max_num_seqs"): 2},
                              {"at": "2026-12-06T00:00:00Z", "run_id": "s"}, out)
        assert text.startswith(f"# instance '{name}' of fleet f as the fleet serves it")
        assert yaml.safe_load(text)["engine"]["max_num_seqs"] == 2


def test_a_variation_is_written_as_the_set_text_that_reads_it_back():
    for value in (8, 2.5, True, "auto"):
        variation = Variation("engine.max_num_seqs", value, "x")
        back = parse_override(variation.set_text())
        assert (back.key, back.value) == ("engine.max_num_seqs", value)
    assert Variation("engine.max_num_seqs", 8, "x").set_text() == "engine.max_num_seqs=8"
