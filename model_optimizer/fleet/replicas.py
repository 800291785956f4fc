"""The replicas ``mopt split --replicas`` compares with (the third arm): the single server
cut into as many copies as the fleet has instances, behind the same router with no class
rule, as a :class:`LoadedFleet` that ``fleet.run.run_fleet`` runs like any fleet.

The rule, for a fleet of N instances:

- replica i (``replica-1`` ... ``replica-N``) is the single server's model and engine (the
  derived one, or ``--single``'s recipe) on instance i's machine: its ``cores`` and its share
  (``kv_cache_gib`` on a CPU, ``gpu_memory_utilization`` on a GPU, as instance i is served),
  instance i taken in the fleet file's order; so the replicas hold the hardware the
  fleet's instances hold, each its own;
- ``max_num_seqs`` is the single server's divided by N, rounded up: together the replicas
  may hold as many sequences as the single server (up to N-1 more from the rounding), and
  as the fleet when the single server is the derived one (its ``max_num_seqs`` is the
  fleet's sum); ``max_model_len`` is the single server's (every replica serves every class);
- behind the fleet's router (LiteLLM's proxy, its port and start timeout) as one model group
  under ``router.model``, balanced by LiteLLM's ``least-busy`` strategy (:data:`STRATEGY`),
  no class rule: the router's cost is the fleet's, and the only difference between the
  fleet arm and this one is where a class goes.

Why ``least-busy``: it sends each request to the deployment with the fewest requests in
flight (LiteLLM counts them itself, one worker here), which is what a load balancer in front
of replicas does; ``simple-shuffle`` picks at random and can pile a burst on one replica;
``usage-based-routing`` balances tokens per minute against limits the replicas do not have;
``latency-based-routing`` follows past latencies, which a long prompt skews. Ties go to the
first replica, so at a concurrency of 1 every request goes there (the window is then flagged:
a replica that served nothing).

Errors are the recipe checks' (file:line), each led by the replica it concerns; the shares
are checked like a fleet's (the card's memory, the machine's), though taking the fleet's own
shares they fit where the fleet does: replicas that do not fit are refused before anything
starts.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import yaml

from model_optimizer.errors import RecipeError
from model_optimizer.fleet.members import KV_SPACE_ENV
from model_optimizer.fleet.rules import share_rules
from model_optimizer.fleet.single import SHARES, checked_member, named, single_given
from model_optimizer.fleet.spec import Instance, LoadedFleet, RouterSpec
from model_optimizer.recipe import LoadedRecipe, Variation

STRATEGY = "least-busy"
REPLICAS = "replicas"


def replica_name(index: int) -> str:
    """The name of replica ``index`` (1-based)."""
    return f"replica-{index}"


def replica_seqs(single_seqs: int | None, count: int) -> int:
    """Each replica's ``max_num_seqs``: the single server's divided by ``count``, rounded up."""
    return max(1, math.ceil((single_seqs or 1) / count))


def replicas_fleet(fleet: LoadedFleet, single: LoadedRecipe,
                   recipe: str | Path | None = None) -> LoadedFleet:
    """The replicas of ``single`` (the server :func:`fleet.single.single_server` derived from
    ``fleet``, or from ``recipe``) as a fleet (the rule in the module's docstring)."""
    name, given, label = single_given(fleet, recipe)
    seqs = replica_seqs(single.spec.engine.max_num_seqs, len(fleet.instances))
    instances: dict[str, Instance] = {}
    for index, (source, instance) in enumerate(fleet.instances.items(), start=1):
        replica = replica_name(index)
        cores = list(instance.cores) if instance.cores else None
        loaded = checked_member(fleet, name, _replica(fleet, given, source, seqs), cores,
                                f"{replica} ({label}, on instance '{source}''s cores and "
                                "share)")
        loaded = named(loaded, f"{fleet.name}.{replica}"[:64], f"{replica}: the replica")
        instances[replica] = Instance(replica, loaded, instance.cores, single_classes(single))
    _check_shares(fleet, instances)
    router = RouterSpec(fleet.router.port, fleet.router.model, (), None,
                        fleet.router.startup_timeout_s, balance=STRATEGY)
    record = replicas_record(fleet, instances, seqs)
    text = ("# the replicas mopt split derived from the fleet (a record, not a fleet file)\n"
            + yaml.safe_dump(record, sort_keys=False))
    return LoadedFleet(fleet.path, text, record, record, fleet.source_map, instances, router,
                       fleet.front)


def single_classes(single: LoadedRecipe) -> tuple[str, ...]:
    """The workload's classes (every replica serves every class)."""
    mix = single.resolved.get("workload", {}).get("mix")
    return tuple(str(name) for name in mix) if isinstance(mix, dict) else ()


def _replica(fleet: LoadedFleet, given: dict, source: str, seqs: int) -> dict:
    """The single server's instance mapping with instance ``source``'s share as served and
    ``seqs`` sequences."""
    replica = {key: value for key, value in given.items() if key not in SHARES}
    replica.update(served_share(fleet, source))
    if replica.get("recipe"):
        rule = Variation("engine.max_num_seqs", seqs, "a replica: the single server's "
                                                      "max_num_seqs / the instances")
        replica["set"] = [*(replica.get("set") or []), rule]
    else:
        replica["engine"] = {**(replica.get("engine") or {}), "max_num_seqs": seqs}
    return replica


def served_share(fleet: LoadedFleet, name: str) -> dict:
    """Instance ``name``'s share as it is served (its own key, or what its recipe sets):
    ``kv_cache_gib`` on a CPU, ``gpu_memory_utilization`` on a GPU; {} for none."""
    engine = fleet.instances[name].recipe.spec.engine
    if fleet.accelerator != "cpu":
        return {"gpu_memory_utilization": engine.gpu_memory_utilization}
    space = str(engine.env.get(KV_SPACE_ENV, "")).strip()
    return {"kv_cache_gib": int(space)} if space.isdigit() else {}


def _check_shares(fleet: LoadedFleet, instances: dict[str, Instance]) -> None:
    """The replicas' shares against the card (or the machine's memory), like a fleet's."""
    members = {name: inst.recipe for name, inst in instances.items()}
    problems = share_rules(fleet.resolved, members, fleet.source_map)
    if problems:
        raise RecipeError([dataclasses.replace(d, message=f"--replicas: {d.message}")
                           for d in problems])


def replicas_record(fleet: LoadedFleet, instances: dict[str, Instance], seqs: int) -> dict:
    """What the replicas are, as archived (``replicas.yaml``, the window's given file)."""
    sources = list(fleet.instances)
    out = {}
    for index, (name, inst) in enumerate(instances.items()):
        engine = inst.recipe.resolved.get("engine") or {}
        out[name] = {"from_instance": sources[index],
                     "cores": list(inst.cores) if inst.cores else None,
                     "served_name": inst.served_name, "max_num_seqs": seqs,
                     "max_model_len": engine.get("max_model_len"),
                     **served_share(fleet, sources[index])}
    return {"name": f"{fleet.name}-{REPLICAS}"[:64], "hardware": fleet.resolved.get("hardware"),
            "instances": out, "router": {"model": fleet.router.model, "balance": STRATEGY,
                                         "routes": []}}
