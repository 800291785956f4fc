"""The one server a fleet is compared with (``mopt split``): the rule that derives it, or a
declared recipe, checked like a fleet member (file:line errors).

The default is the fleet's **first instance given the whole machine**: its model and engine
as the fleet serves it, with every core the fleet's engines hold, the sum of the instances'
shares (``kv_cache_gib`` on a CPU, ``gpu_memory_utilization`` on a GPU), the sum of their
``max_num_seqs`` (it may hold as many sequences as the fleet does) and the longest
``max_model_len`` (it serves every class). A declared recipe (``--single``) keeps its model
and engine as written; it gets the whole machine's cores and, unless it sets its own, the sum
of the shares. Either way the single server runs the fleet's whole workload and SLOs, and
answers to the model name clients ask the router for (``router.model``), so one client
serves both. The replicas (``--replicas``, a third arm) are copies of this server:
``fleet/replicas.py``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from model_optimizer.errors import RecipeError, UsageError
from model_optimizer.fleet.load import is_fleet_document, shared_of
from model_optimizer.fleet.members import KV_SPACE_ENV, member_recipe
from model_optimizer.fleet.rules import workload_classes
from model_optimizer.fleet.spec import LoadedFleet
from model_optimizer.recipe import LoadedRecipe, Variation
from model_optimizer.recipe.yamlsource import read_yaml_file

SINGLE = "single"
SHARES = ("kv_cache_gib", "gpu_memory_utilization")
_WHOLE = "the single server: the fleet's instances summed"


def single_server(fleet: LoadedFleet, recipe: str | Path | None = None) -> LoadedRecipe:
    """The single server to compare ``fleet`` with: ``recipe`` (a recipe file) when given,
    else the fleet's first instance given the whole machine. UsageError for a fleet of one
    instance or a file that is not a recipe; RecipeError (file:line) for a server the recipe
    checks refuse."""
    name, given, label = single_given(fleet, recipe)
    loaded = checked_member(fleet, name, given, whole_cores(fleet), label)
    return named(loaded, f"{fleet.name}.{SINGLE}"[:64])


def single_given(fleet: LoadedFleet, recipe: str | Path | None) -> tuple[str, dict, str]:
    """The single server as a fleet instance, before its checks: (the instance name its
    values are located under, the instance's mapping, the label its errors carry)."""
    if len(fleet.instances) < 2:
        raise UsageError(f"{fleet.path or fleet.name}: a fleet of one instance is one server: "
                         "there is nothing to split; add an instance (or use `mopt apply`)")
    if recipe is None:
        name = next(iter(fleet.instances))
        return name, _whole_machine(fleet, name), f"the single server (instance '{name}' " \
                                                  "given the whole machine)"
    return SINGLE, _declared(fleet, Path(recipe)), f"--single {recipe}"


def checked_member(fleet: LoadedFleet, name: str, given: dict, cores: list[int] | None,
                   label: str) -> LoadedRecipe:
    """``given`` checked as the fleet's instance ``name`` serving every class on ``cores``;
    RecipeError (file:line), each message led by ``label``."""
    shared = shared_of(fleet.resolved, fleet.path)
    try:
        return member_recipe(shared, fleet.source_map, name, given, cores,
                             workload_classes(shared.workload) or [])
    except RecipeError as exc:
        raise RecipeError([dataclasses.replace(d, message=f"{label}: {d.message}")
                           for d in exc.diagnostics]) from None


def whole_cores(fleet: LoadedFleet) -> list[int] | None:
    """Every core the fleet's engines hold (None off a CPU, or when no instance has any)."""
    cores = sorted({core for inst in fleet.instances.values() for core in inst.cores or ()})
    return cores or None


def summed_shares(fleet: LoadedFleet) -> dict[str, float]:
    """The instances' shares added up, per kind of share that any instance sets."""
    out: dict[str, float] = {}
    for inst in fleet.resolved["instances"].values():
        for key in SHARES:
            if inst.get(key) is not None:
                out[key] = round(out.get(key, 0) + inst[key], 6)
    return out


def _engine_sums(fleet: LoadedFleet) -> dict[str, int]:
    """``max_num_seqs`` summed over the instances, the longest ``max_model_len``."""
    engines = [inst.recipe.spec.engine for inst in fleet.instances.values()]
    out = {"max_num_seqs": sum(e.max_num_seqs or 1 for e in engines)}
    lens = [e.max_model_len for e in engines if e.max_model_len]
    if lens:
        out["max_model_len"] = max(lens)
    return out


def _whole_machine(fleet: LoadedFleet, name: str) -> dict:
    """Instance ``name`` as written, given the whole machine (the rule above)."""
    instance = {**fleet.resolved["instances"][name], **summed_shares(fleet), "port": 0}
    knobs = _engine_sums(fleet)
    if instance.get("recipe"):
        sets = [Variation(f"engine.{key}", value, _WHOLE) for key, value in knobs.items()]
        instance["set"] = [*(instance.get("set") or []), *sets, _served_as(fleet)]
    else:
        instance["engine"] = {**(instance.get("engine") or {}), **knobs}
        instance["model"] = {**(instance.get("model") or {}),
                             "served_name": fleet.router.model}
    return instance


def _declared(fleet: LoadedFleet, path: Path) -> dict:
    """A recipe file as the single server: its own share when it sets one, else the sum."""
    if not path.is_file():
        raise UsageError(f"--single {path}: no such recipe file (give a recipe YAML, e.g. "
                         "recipes/tiny-cpu.yaml)")
    data, _, _ = read_yaml_file(path)
    if is_fleet_document(data):
        raise UsageError(f"--single {path}: that is a fleet file; give the one server's "
                         "recipe")
    engine = (data.get("engine") if isinstance(data, dict) else None) or {}
    own = isinstance(engine, dict) and (engine.get("gpu_memory_utilization") is not None
                                        or KV_SPACE_ENV in (engine.get("env") or {}))
    return {"recipe": str(path.resolve()), "set": [_served_as(fleet)],
            "port": 0, **({} if own else summed_shares(fleet))}


def _served_as(fleet: LoadedFleet) -> Variation:
    """The single server answers to the model name clients ask the router for."""
    return Variation("model.served_name", fleet.router.model, "the router's model name")


def named(loaded: LoadedRecipe, name: str, what: str = "the single server") -> LoadedRecipe:
    """``loaded`` under ``name``, with its document as the text it was given as (a member's
    text is its file's, or none for an inline one)."""
    document = {**loaded.document, "name": name}
    text = (f"# {what} mopt split derived from the fleet, as checked\n"
            + yaml.safe_dump(document, sort_keys=False))
    return LoadedRecipe(loaded.path, text, document, {**loaded.resolved, "name": name},
                        loaded.source_map, loaded.written_version)
