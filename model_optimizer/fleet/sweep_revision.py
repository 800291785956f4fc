"""A new revision of a fleet file with each instance's ``max_num_seqs`` as swept alone under
its own classes' traffic (``mopt split FLEET --sweep-instances``), the figures beside it
(``sweep_evidence``), written like ``mopt route``'s revision (``fleet/revision.py``).

Where the value goes: an inline instance's ``engine.max_num_seqs``; for a member recipe an
entry of the instance's ``set:`` (one that set the knob is replaced where it stood, else one
is added), so no member file is rewritten. The text is the given file's, round-tripped
(comments, key order and flow style kept), ``revision`` bumped, the ``sweep_evidence`` block
replaced; it is loaded and checked as a fleet (each instance must serve the value its
evidence says) before it is written, under the lock recipe revisions use.

:func:`sweepable` is the instance as the fleet serves it, as a recipe whose text is that
document (its cores, its share, only its classes' workload), so the sweep's own revision
writer round-trips it into the instance's revision beside the experiment.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from model_optimizer.archive import utc_now
from model_optimizer.errors import UsageError
from model_optimizer.fleet.revision import bump, write_fleet_revision
from model_optimizer.fleet.rules import SWEEP_EVIDENCE
from model_optimizer.fleet.spec import LoadedFleet
from model_optimizer.recipe import LoadedRecipe, Variation
from model_optimizer.recipe.overrides import parse_override
from model_optimizer.recipe.writer import replace_block, round_trip

PARAM = "max_num_seqs"
KEY = f"engine.{PARAM}"
SOURCE = "mopt split --sweep-instances"


@dataclass(frozen=True)
class InstanceSweep:
    """One instance's sweep as it ended: its archive, the value chosen (None: nothing was
    chosen, or ``--strict`` refused it), the verdict on it, the figures it rests on."""

    name: str
    run_id: str
    value: int | None
    resolved: bool | None
    status: str = "ok"
    reason: str = ""
    figures: dict = field(default_factory=dict)  # the chosen value's validated metrics
    knee: dict | None = None                     # a fitted knee's verdict (probe-fit)
    exit_code: int = 0

    def evidence(self) -> dict:
        """This instance's entry of ``sweep_evidence.instances``."""
        return {"run_id": self.run_id, "value": self.value, "resolved": bool(self.resolved),
                "reason": self.reason, "figures": dict(self.figures), "knee": self.knee}

    def to_dict(self) -> dict:
        """JSON form (the experiment's sweeps.json, ``--json``)."""
        return {"instance": self.name, "status": self.status, "exit_code": self.exit_code,
                **self.evidence(), "resolved": self.resolved}


def sweepable(fleet: LoadedFleet, name: str) -> LoadedRecipe:
    """Instance ``name`` as the fleet serves it, as a recipe whose text is its document
    : the sweep's steps vary that text (``LoadedRecipe.varied`` re-reads it), so each step
    serves what the fleet serves, and its writer round-trips it (comments kept). Its path
    stays the member's (relative model paths resolve as in the fleet)."""
    recipe = fleet.instances[name].recipe
    header = (f"# instance '{name}' of fleet {fleet.name} as the fleet serves it (its cores, "
              "its share, the workload of its own classes), written by mopt split "
              "--sweep-instances\n")
    text = header + yaml.safe_dump(recipe.document, sort_keys=False)
    return LoadedRecipe(recipe.path, text, recipe.document, recipe.resolved,
                        recipe.source_map, recipe.written_version)


def sweep_evidence(experiment: str, sweeps: list[InstanceSweep]) -> dict:
    """The ``sweep_evidence`` block: the experiment's archive, when, each instance's entry."""
    return {"run_id": experiment, "measured_at": utc_now(),
            "instances": {sweep.name: sweep.evidence() for sweep in sweeps}}


def render_sweeps(text: str, values: dict[str, int], evidence: dict, number: int) -> str:
    """``text`` with each instance's value where it belongs, ``revision: number`` and the
    ``sweep_evidence`` block."""
    rt, data = round_trip(text)
    bump(data, number)
    for name, value in values.items():
        node = data["instances"][name]
        if node.get("recipe"):
            _set_entry(node, value)
        else:
            if node.get("engine") is None:
                node["engine"] = CommentedMap()
            node["engine"][PARAM] = value
    replace_block(data, SWEEP_EVIDENCE, evidence)
    out = io.StringIO()
    rt.dump(data, out)
    return out.getvalue()


def _set_entry(node: CommentedMap, value: int) -> None:
    """The member's ``set:`` with ``engine.max_num_seqs`` = ``value``: the first entry that
    set it replaced where it stood (any later one dropped), else one added at the end."""
    entry = Variation(KEY, value, SOURCE).set_text()
    entries = node.get("set")
    if entries is None:
        entries = CommentedSeq([entry])
        entries.fa.set_flow_style()
        node.insert(list(node).index("recipe") + 1, "set", entries)
        return
    places = [i for i, item in enumerate(entries)
              if isinstance(item, str) and parse_override(item).key == KEY]
    if not places:
        entries.append(entry)
        return
    entries[places[0]] = entry
    for index in reversed(places[1:]):
        del entries[index]


def write_sweeps(fleet: LoadedFleet, sweeps: list[InstanceSweep], experiment: str,
                 output: str | Path | None = None) -> tuple[Path, int, str]:
    """Write the next revision of ``fleet`` (over its file, or to ``output``) with each
    swept instance's value and the evidence beside it; its path, number and text.
    UsageError for a sweep that chose nothing or an instance the fleet lacks, RecipeError
    for a text the fleet checks refuse: nothing is written."""
    unknown = [s.name for s in sweeps if s.name not in fleet.instances]
    unchosen = [s.name for s in sweeps if s.value is None]
    if unknown or unchosen or not sweeps:
        raise UsageError(f"no fleet revision: instances {unknown} are not in the fleet, "
                         f"{unchosen} have no value chosen" if sweeps else
                         "no fleet revision: no instance was swept")
    values = {s.name: int(s.value) for s in sweeps}
    evidence = sweep_evidence(experiment, sweeps)

    def check(written: LoadedFleet) -> None:
        served = {n: written.instances[n].recipe.spec.engine.max_num_seqs for n in values}
        if served != values:  # a safety net: the evidence rule already checks each value
            raise UsageError(f"the revision would not serve the swept values: {served}, "
                             f"not {values}")

    return write_fleet_revision(
        fleet, lambda text, number: render_sweeps(text, values, evidence, number),
        check, output)

