"""Cross-field rules of a fleet the JSON Schema cannot express, each located in the file.

Structure and routing (:func:`structure_rules`, on the resolved fleet document): an instance
is a recipe or inline sections, not both; no two instances (or an instance and the router)
on one port; no two engines on one core, and no core the machine lacks; every route's
instance exists; a route's class is one the workload has; a class routed twice, or a rule
the router can never reach (a length rule below every prompt of its class, a second rule of
the same threshold), cannot match; a class with no rule and no fallback is routed nowhere;
tag and length rules are not mixed under one model name (the router would apply both); a
``routing_evidence`` block (written by ``mopt route``) names instances the fleet has, and
every class goes where it says (a routing table edited by hand no longer agrees); a
``sweep_evidence`` block (``mopt split --sweep-instances``) names instances the fleet has,
each serving the ``max_num_seqs`` it says (:func:`sweep_evidence_rules`, on the members).
Shares (:func:`share_rules`, on the members as served): GPU ``gpu_memory_utilization``
summing over 1, CPU KV space over the machine's memory.
"""

from __future__ import annotations

from model_optimizer.errors import Diagnostic
from model_optimizer.fleet.members import KV_SPACE_ENV
from model_optimizer.fleet.spec import BY_FALLBACK, BY_LENGTH, BY_MODEL, BY_TAG, Route
from model_optimizer.mix import parse_mix
from model_optimizer.plan.accelerators import resolve_hardware
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.recipe.placement_rules import machine_cores
from model_optimizer.recipe.validate import did_you_mean
from model_optimizer.recipe.yamlsource import SourceMap

#: the most of one card the instances' gpu_memory_utilization may add up to
GPU_SHARE_LIMIT = 1.0


def workload_classes(workload: dict) -> list[str] | None:
    """The classes of a mix, in order; None when they are not known before the load (a
    dataset's labels) or there are none."""
    mix = workload.get("mix")
    return [str(name) for name in mix] if isinstance(mix, dict) and mix else None


def prompt_ranges(workload: dict) -> dict[str, tuple[int, int]]:
    """Each mix class's shortest and longest prompt (tokens), where the mix parses."""
    try:
        return {c.name: (c.prompt_tokens.low, c.prompt_tokens.high)
                for c in parse_mix(workload.get("mix") or {})}
    except ValueError:
        return {}


def structure_rules(fleet: dict, smap: SourceMap) -> list[Diagnostic]:
    """Every instance, port, core and routing problem of a resolved fleet document."""
    out: list[Diagnostic] = []
    for rule in (_instance_rules, _port_rules, _core_rules, _route_rules, _class_rules,
                 _evidence_rules):
        try:
            out.extend(rule(fleet, smap))
        except (KeyError, TypeError, AttributeError, ValueError):
            continue  # malformed inputs: the schema has reported them
    return out


def _instance_rules(fleet: dict, smap: SourceMap) -> list[Diagnostic]:
    out = []
    on_cpu = fleet.get("hardware", {}).get("accelerator") == "cpu"
    for name, inst in fleet["instances"].items():
        here = ("instances", name)
        if bool(inst.get("recipe")) == bool(inst.get("model")):
            out.append(smap.diagnostic(here, "an instance is a member recipe (recipe: FILE) "
                                       "or inline sections (model:, engine:), exactly one",
                                       "keep recipe, or model with engine", prefer_key=True))
        if inst.get("engine") and inst.get("recipe"):
            out.append(smap.diagnostic((*here, "engine"), "engine is for inline instances",
                                       "with recipe, change knobs with set: [engine.x=...]",
                                       prefer_key=True))
        if inst.get("set") and not inst.get("recipe"):
            out.append(smap.diagnostic((*here, "set"), "set overrides a member recipe",
                                       "write the value in the inline section instead",
                                       prefer_key=True))
        if on_cpu and inst.get("gpu_memory_utilization") is not None:
            out.append(smap.diagnostic((*here, "gpu_memory_utilization"),
                                       "gpu_memory_utilization is a GPU share; this fleet "
                                       "is on cpu", "give the instance kv_cache_gib instead",
                                       prefer_key=True))
        if not on_cpu and inst.get("kv_cache_gib") is not None:
            out.append(smap.diagnostic((*here, "kv_cache_gib"), "kv_cache_gib is a CPU share; "
                                       "this fleet is on a GPU", "give the instance "
                                       "gpu_memory_utilization instead", prefer_key=True))
    return out


def _port_rules(fleet: dict, smap: SourceMap) -> list[Diagnostic]:
    out, seen = [], {}
    router_port = fleet["router"].get("port", 0)
    if router_port:
        seen[router_port] = ("router", "port")
    for name, inst in fleet["instances"].items():
        port, here = inst.get("port", 0), ("instances", name, "port")
        if not port:
            continue
        if port in seen:
            other = ".".join(str(p) for p in seen[port])
            out.append(smap.diagnostic(here, f"port {port} is also {other}'s: two servers "
                                       "cannot listen on one port",
                                       "give each a port of its own, or 0 for a free one"))
        else:
            seen[port] = here
    return out


def assign_cores(fleet: dict) -> dict[str, list[int] | None]:
    """Each instance's engine cores on cpu: its own, else the next core no instance names
    (None off cpu, or when the machine has run out of cores)."""
    if fleet.get("hardware", {}).get("accelerator") != "cpu":
        return {name: inst.get("cores") for name, inst in fleet["instances"].items()}
    taken = {c for inst in fleet["instances"].values() for c in inst.get("cores") or []}
    free = [core for core in machine_cores() if core not in taken]
    out = {}
    for name, inst in fleet["instances"].items():
        out[name] = inst.get("cores") or ([free.pop(0)] if free else None)
    return out


def _core_rules(fleet: dict, smap: SourceMap) -> list[Diagnostic]:
    if fleet.get("hardware", {}).get("accelerator") != "cpu":
        return []
    out, owner = [], {}
    for name, inst in fleet["instances"].items():
        for core in inst.get("cores") or []:
            if core in owner:
                out.append(smap.diagnostic(
                    ("instances", name, "cores"), f"core {core} is also instance "
                    f"'{owner[core]}''s: two engines on one core take turns",
                    f"give each instance its own cores (this machine has {machine_cores()})"))
            owner.setdefault(core, name)
    for name, cores in assign_cores(fleet).items():
        if cores is None:
            out.append(smap.diagnostic(
                ("instances", name), f"no core is left for instance '{name}' (this machine "
                f"has {len(machine_cores())})", "run fewer instances on this machine: each engine "
                "takes a core of its own", prefer_key=True))
    return out


def _route_rules(fleet: dict, smap: SourceMap) -> list[Diagnostic]:
    router, names = fleet["router"], list(fleet["instances"])
    out = []
    routes = [Route.of(i, item) for i, item in enumerate(router["routes"])]
    fallback = router.get("fallback")
    if fallback is not None and fallback not in names:
        out.append(smap.diagnostic(("router", "fallback"), f"no instance '{fallback}'",
                                   did_you_mean(fallback, names) or f"one of {names}"))
    labels: dict[tuple[str, str], Route] = {}
    for route in routes:
        here = ("router", "routes", route.index)
        if route.to not in names:
            out.append(smap.diagnostic((*here, "to"), f"no instance '{route.to}'",
                                       did_you_mean(route.to, names) or f"one of {names}"))
        given = [k for k in ("model", "tag", "max_prompt_tokens") if getattr(route, k) is not None]
        if len(given) > 1:
            out.append(smap.diagnostic(here, f"a route is recognized one way; this one has "
                                       f"{' and '.join(given)}", "keep one of them"))
        if route.by == BY_FALLBACK and route.to != fallback:
            out.append(smap.diagnostic(here, f"nothing tells the router which requests are "
                                       f"'{route.request_class}': the rule can never match",
                                       f"add model:, tag: or max_prompt_tokens:, or make "
                                       f"'{route.to}' the fallback"))
        if route.model is not None and route.model == (router.get("model") or fleet["name"]):
            out.append(smap.diagnostic((*here, "model"), f"'{route.model}' is the router's "
                                       "own model name (router.model)", "name the class's "
                                       "model differently"))
        for kind in (BY_MODEL, BY_TAG):
            value = getattr(route, kind)
            first = labels.get((kind, value)) if value is not None else None
            if first is not None and first.to != route.to:
                out.append(smap.diagnostic((*here, kind), f"{kind} '{value}' already goes to "
                                           f"'{first.to}' (routes[{first.index}])",
                                           f"one {kind} names one instance"))
            elif value is not None:
                labels[(kind, value)] = route
    kinds = {r.by for r in routes}
    if BY_TAG in kinds and BY_LENGTH in kinds:
        first = next(r for r in routes if r.by == BY_LENGTH)
        out.append(smap.diagnostic(("router", "routes", first.index), "tag rules and length "
                                   "rules both filter the router's model name: they cannot "
                                   "be combined", "route these classes by model: instead"))
    return out + _length_rules(routes, smap)


def _length_rules(routes: list[Route], smap: SourceMap) -> list[Diagnostic]:
    out, seen = [], {}
    for route in sorted((r for r in routes if r.by == BY_LENGTH), key=lambda r: r.index):
        first = seen.get(route.max_prompt_tokens)
        if first is not None and first.to != route.to:
            out.append(smap.diagnostic(
                ("router", "routes", route.index, "max_prompt_tokens"),
                f"routes[{first.index}] sends the same lengths to '{first.to}': this rule "
                "can never match", "give it another threshold"))
        seen.setdefault(route.max_prompt_tokens, route)
    return out


def _class_rules(fleet: dict, smap: SourceMap) -> list[Diagnostic]:
    """Routes against the workload's classes (a mix's; a dataset's are read at the run)."""
    classes = workload_classes(fleet.get("workload") or {})
    if classes is None:
        return []
    router, out = fleet["router"], []
    routes = [Route.of(i, item) for i, item in enumerate(router["routes"])]
    ranges = prompt_ranges(fleet["workload"])
    first_for: dict[str, Route] = {}
    for route in routes:
        here = ("router", "routes", route.index)
        if route.request_class not in classes:
            out.append(smap.diagnostic((*here, "class"), f"the workload has no class "
                                       f"'{route.request_class}': the rule can never match",
                                       did_you_mean(route.request_class, classes)
                                       or f"classes: {', '.join(classes)}"))
            continue
        if route.request_class in first_for:
            first = first_for[route.request_class]
            out.append(smap.diagnostic((*here, "class"), f"class '{route.request_class}' is "
                                       f"already routed by routes[{first.index}]: this rule "
                                       "can never match", "one rule per class"))
            continue
        first_for[route.request_class] = route
        low = ranges.get(route.request_class, (0, 0))[0]
        if route.by == BY_LENGTH and low > route.max_prompt_tokens:
            out.append(smap.diagnostic(
                (*here, "max_prompt_tokens"), f"class '{route.request_class}' prompts are "
                f"{low} tokens or more, over max_prompt_tokens {route.max_prompt_tokens}: the "
                "rule can never match", f"raise it to at least {low}, or route the class "
                "another way"))
    if router.get("fallback") is None:
        for name in classes:
            if name not in first_for:
                out.append(smap.diagnostic(("router", "routes"), f"class '{name}' is routed "
                                           "nowhere: no rule names it and there is no "
                                           "fallback", f"add a route for '{name}', or set "
                                           "router.fallback", prefer_key=True))
    return out


def _evidence_rules(fleet: dict, smap: SourceMap) -> list[Diagnostic]:
    """The routing table against the measured precision routing it was written from."""
    evidence = fleet.get("routing_evidence")
    if not evidence:
        return []
    names, out = list(fleet["instances"]), []
    for role in ("fast", "precise"):
        if evidence[role] not in names:
            out.append(smap.diagnostic(("routing_evidence", role), f"no instance "
                                       f"'{evidence[role]}'", "run `mopt route` again"))
    router = fleet["router"]
    routes = {item["class"]: Route.of(i, item) for i, item in enumerate(router["routes"])}
    for name, found in evidence["classes"].items():
        route = routes.get(name)
        relies = route is None or route.by == BY_FALLBACK
        goes = router.get("fallback") if relies else route.to
        if goes == found["to"]:
            continue
        here = ("router", "fallback") if relies else ("router", "routes", route.index, "to")
        out.append(smap.diagnostic(here, f"class '{name}' goes to '{goes}' here, but "
                                   f"routing_evidence routes it to '{found['to']}' from "
                                   "measured quality: the table was changed by hand",
                                   "run `mopt route` again, or delete routing_evidence"))
    return out


SWEEP_EVIDENCE = "sweep_evidence"


def sweep_evidence_rules(fleet: dict, members: dict[str, LoadedRecipe],
                         smap: SourceMap) -> list[Diagnostic]:
    """The instances' ``max_num_seqs`` as served against the swept values they were written
    from (``sweep_evidence``, by ``mopt split --sweep-instances``): each at its own line (the
    inline instance's, or the member recipe's ``set:`` entry or file)."""
    evidence = (fleet.get(SWEEP_EVIDENCE) or {}).get("instances") or {}
    out = []
    for name, found in evidence.items():
        if name not in fleet["instances"]:
            out.append(smap.diagnostic(
                (SWEEP_EVIDENCE, "instances", name), f"no instance '{name}'",
                did_you_mean(name, list(fleet["instances"])) or "run `mopt split FLEET "
                f"--sweep-instances` again, or delete {SWEEP_EVIDENCE}", prefer_key=True))
            continue
        member = members.get(name)
        serves = member.spec.engine.max_num_seqs if member is not None else None
        if member is None or serves == found["value"]:
            continue
        out.append(member.source_map.diagnostic(
            ("engine", "max_num_seqs"), f"serves max_num_seqs {serves} here, but "
            f"{SWEEP_EVIDENCE} chose {found['value']} by sweeping it: the value was changed "
            "by hand", f"run `mopt split FLEET --sweep-instances` again, or delete "
            f"{SWEEP_EVIDENCE}.instances.{name}"))
    return out


def share_rules(fleet: dict, members: dict[str, LoadedRecipe],
                smap: SourceMap) -> list[Diagnostic]:
    """The instances' shares of the one accelerator, as served, against what it has."""
    hardware = fleet.get("hardware") or {}
    if hardware.get("accelerator") == "cpu":
        return _cpu_shares(hardware, members, smap)
    shares = {name: m.spec.engine.gpu_memory_utilization for name, m in members.items()}
    total = sum(shares.values())
    if total <= GPU_SHARE_LIMIT + 1e-9:
        return []
    listed = ", ".join(f"{name} {share:g}" for name, share in shares.items())
    return [smap.diagnostic(("instances",), f"the instances' gpu_memory_utilization add up "
                            f"to {total:.2f} ({listed}): more than the card",
                            f"give each a share so they sum to at most {GPU_SHARE_LIMIT:g} "
                            "(each instance's gpu_memory_utilization)", prefer_key=True)]


def _cpu_shares(hardware: dict, members: dict[str, LoadedRecipe],
                smap: SourceMap) -> list[Diagnostic]:
    memory = resolve_hardware(hardware).memory_gib
    spaces = {}
    for name, member in members.items():
        value = str(member.spec.engine.env.get(KV_SPACE_ENV, "")).strip()
        spaces[name] = int(value) if value.isdigit() else 0
    total = sum(spaces.values())
    if total <= memory:
        return []
    listed = ", ".join(f"{name} {gib} GiB" for name, gib in spaces.items())
    return [smap.diagnostic(("instances",), f"the instances' KV space adds up to {total} GiB "
                            f"({listed}), more than the {memory:g} GiB of hardware.memory_gib",
                            "lower kv_cache_gib, or raise hardware.memory_gib to what the "
                            "machine has", prefer_key=True)]
