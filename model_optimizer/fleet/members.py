"""Each instance of a fleet as a recipe (``LoadedRecipe``), checked like any recipe.

A member is a recipe file (``recipe:``, with ``set:`` overrides) or inline ``model`` and
``engine`` sections. The fleet decides what the instances share: its ``hardware`` (with the
instance's ``cores`` as ``hardware.placement.engine``), its workload (only the classes the
routes send to the instance, so the plan sizes each instance for its own traffic) and SLOs,
and the instance's port and share of the accelerator. The combined document goes through
the recipe checks (schema, then cross-field rules); :class:`MemberSourceMap` reports each
problem where its value was written: in the member file, or in the fleet file for what the
fleet set. The *front* recipe is the router's side: the fleet's workload and SLOs, what the
load runs with.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from model_optimizer.errors import Diagnostic, RecipeError
from model_optimizer.recipe import LoadedRecipe, resolve
from model_optimizer.recipe.migrate import migrate
from model_optimizer.recipe.overrides import apply_overrides
from model_optimizer.recipe.render import model_location
from model_optimizer.recipe.rules import check_rules
from model_optimizer.recipe.validate import schema_diagnostics
from model_optimizer.recipe.yamlsource import SourceMap, read_yaml_file

KV_SPACE_ENV = "VLLM_CPU_KVCACHE_SPACE"


class MemberSourceMap(SourceMap):
    """Where a member's values were written: the fleet's ``routes`` (a member path prefix ->
    a fleet path) first, then the member file (``member``), else the inline instance."""

    def __init__(self, fleet: SourceMap, instance: str | None,
                 routes: list[tuple[tuple, tuple]], member: SourceMap | None = None):
        super().__init__(member.file if member else fleet.file)
        self.fleet, self.instance, self.routes, self.member = fleet, instance, routes, member

    def diagnostic(self, path, message, hint=None, prefer_key=False) -> Diagnostic:
        path = tuple(path)
        who = f"instance '{self.instance}': " if self.instance else ""
        for prefix, target in self.routes:
            if path[:len(prefix)] == prefix:
                return self.fleet.diagnostic((*target, *path[len(prefix):]) if target
                                             else path, who + message, hint, prefer_key)
        if self.member is not None:
            return self.member.diagnostic(path, who + message, hint, prefer_key)
        home = ("instances", self.instance) if self.instance else ("router",)
        return self.fleet.diagnostic((*home, *path), who + message, hint, prefer_key)


@dataclass(frozen=True)
class Shared:
    """What the fleet gives every member: its name, hardware, workload, SLOs, folder."""

    fleet_name: str
    hardware: dict
    workload: dict
    slo: dict
    base_dir: Path
    fleet_path: Path | None = None  # the fleet file (inline members' models are relative to it)


def instance_classes(routes: list[dict], fallback: str | None, instance: str,
                     classes: list[str]) -> list[str]:
    """The workload classes an instance serves: those routed to it, and (the fallback) those
    no route names."""
    named = {route["class"] for route in routes}
    mine = [c for c in classes if any(r["class"] == c and r["to"] == instance for r in routes)]
    if instance == fallback:
        mine += [c for c in classes if c not in named]
    return mine


def restrict_workload(workload: dict, slo: dict, keep: list[str]) -> tuple[dict, dict]:
    """The workload and SLOs with only the classes ``keep`` (all of them when the workload
    has no mix, or ``keep`` is empty: an instance no class reaches is planned for all)."""
    mix = workload.get("mix")
    if not isinstance(mix, dict) or not keep:
        return workload, slo
    workload = {**workload, "mix": {name: mix[name] for name in mix if name in keep}}
    classes = slo.get("classes") if isinstance(slo, dict) else None
    if isinstance(classes, dict):
        slo = {**slo, "classes": {k: v for k, v in classes.items() if k in keep} or None}
        if slo["classes"] is None:
            del slo["classes"]
    return workload, slo


def member_recipe(shared: Shared, fleet_smap: SourceMap, name: str, instance: dict,
                  cores: list[int] | None, classes: list[str]) -> LoadedRecipe:
    """Instance ``name`` as a checked recipe; RecipeError lists its problems."""
    routes: list[tuple[tuple, tuple]] = [(("name",), ("instances", name))]
    here = ("instances", name)
    if instance.get("recipe"):
        path = shared.base_dir / instance["recipe"]
        data, member_smap, raw = read_yaml_file(path)
        if not isinstance(data, dict):
            raise RecipeError([fleet_smap.diagnostic((*here, "recipe"),
                                                     f"{path} is not a recipe mapping")])
        doc, _ = migrate(data, member_smap)
        doc, problems = apply_overrides(doc, list(instance.get("set") or []), member_smap)
        source_path, text = path, raw.decode("utf-8")
    else:
        doc = {"recipe_version": 1, "model": instance.get("model"),
               "engine": dict(instance.get("engine") or {})}
        member_smap, problems, source_path = None, [], shared.fleet_path
        text = ""
        routes += [(("model",), (*here, "model")), (("engine",), (*here, "engine"))]
    doc = dict(doc)
    doc["name"] = f"{shared.fleet_name}.{name}"[:64]
    engine = doc["engine"] = dict(doc.get("engine") or {})
    engine["port"] = instance.get("port", 0)
    routes.insert(0, (("engine", "port"), (*here, "port")))
    if instance.get("gpu_memory_utilization") is not None:
        engine["gpu_memory_utilization"] = instance["gpu_memory_utilization"]
        routes.insert(0, (("engine", "gpu_memory_utilization"),
                          (*here, "gpu_memory_utilization")))
    if instance.get("kv_cache_gib") is not None:
        engine["env"] = {**(engine.get("env") or {}), KV_SPACE_ENV: str(instance["kv_cache_gib"])}
        routes.insert(0, (("engine", "env", KV_SPACE_ENV), (*here, "kv_cache_gib")))
    doc["hardware"] = {**shared.hardware,
                       "placement": {"engine": list(cores)} if cores else "none"}
    doc["workload"], doc["slo"] = restrict_workload(shared.workload, shared.slo, classes)
    routes += [(("hardware", "placement"), (*here, "cores")), (("hardware",), ("hardware",)),
               (("workload",), ("workload",)), (("slo",), ("slo",))]
    smap = MemberSourceMap(fleet_smap, name, routes, member_smap)
    return checked(doc, smap, source_path, text or fleet_smap.file, problems)


def front_recipe(shared: Shared, fleet_smap: SourceMap, served_name: str,
                 members: list[LoadedRecipe]) -> LoadedRecipe:
    """The router's side as a recipe: the fleet's workload and SLOs against the router's
    model name, with the first instance's tokenizer, the longest ``max_model_len`` and, for
    a workload that ties concurrency to ``max_num_seqs``, the instances' sum."""
    first = members[0].spec
    lens = [m.spec.engine.max_model_len for m in members if m.spec.engine.max_model_len]
    seqs = sum(m.spec.engine.max_num_seqs or 1 for m in members)
    model = {"path": model_location(first, members[0].base_dir), "served_name": served_name,
             "tokenizer": first.model.tokenizer or model_location(first, members[0].base_dir)}
    doc = {"recipe_version": 1, "name": shared.fleet_name, "model": model,
           "engine": {"max_num_seqs": seqs, **({"max_model_len": max(lens)} if lens else {})},
           "hardware": {**shared.hardware, "placement": "none"},
           "workload": shared.workload, "slo": shared.slo}
    routes = [(("workload",), ("workload",)), (("slo",), ("slo",)),
              (("hardware",), ("hardware",))]
    smap = MemberSourceMap(fleet_smap, None, routes)
    return checked(doc, smap, shared.fleet_path, "", [])


def checked(doc: dict, smap: MemberSourceMap, path: Path | None, text: str,
            problems: list[Diagnostic]) -> LoadedRecipe:
    """Schema, defaults and cross-field rules, as for a recipe file."""
    problems = problems + schema_diagnostics(doc, smap)
    resolved = resolve(doc)
    reported = {p.path for p in problems}
    problems += [p for p in check_rules(resolved, smap) if p.path not in reported]
    if problems:
        raise RecipeError(problems)
    return LoadedRecipe(path, text, doc, resolved, smap, 1)
