"""Load a fleet file: safe YAML with positions, its version, the fleet schema, the structure
and routing rules, each instance as a checked recipe, the shares; every problem at once.

Errors are ``RecipeError`` (exit 2), each ``file:line:column: path: message (fix)``: the
fleet file for what it sets, the member recipe for what the member sets.
"""

from __future__ import annotations

from pathlib import Path

from model_optimizer.errors import Diagnostic, RecipeError
from model_optimizer.fleet.members import Shared, front_recipe, instance_classes, member_recipe
from model_optimizer.fleet.rules import (
    assign_cores,
    share_rules,
    structure_rules,
    sweep_evidence_rules,
    workload_classes,
)
from model_optimizer.fleet.schema import FLEET_VERSION, KIND, fill_fleet_defaults, fleet_schema
from model_optimizer.fleet.spec import Instance, LoadedFleet, Route, RouterSpec
from model_optimizer.recipe.schema import fill_defaults, recipe_schema
from model_optimizer.recipe.validate import diagnostics_against
from model_optimizer.recipe.yamlsource import SourceMap, parse_yaml, read_yaml_file

#: from-version -> function producing the next version's document (none yet: format 1)
MIGRATIONS: dict = {}


def is_fleet_document(data: object) -> bool:
    """True for a parsed YAML document that declares ``kind: fleet``."""
    return isinstance(data, dict) and data.get("kind") == KIND


def is_fleet_file(path: str | Path) -> bool:
    """True when ``path`` is a readable YAML file that declares ``kind: fleet`` (a recipe,
    a missing or broken file: False; loading it as a recipe then reports the problem)."""
    try:
        data, _, _ = read_yaml_file(path)
    except (RecipeError, OSError):
        return False
    return is_fleet_document(data)


def load_fleet(path: str | Path) -> LoadedFleet:
    """Load and check the fleet file at ``path``; RecipeError lists every problem."""
    data, smap, raw = read_yaml_file(path)
    return _load(data, smap, raw.decode("utf-8"), Path(path))


def load_fleet_text(text: str, file: str = "<fleet>", base_dir: Path | None = None) -> LoadedFleet:
    """Like :func:`load_fleet` for text (tests); member paths are relative to ``base_dir``."""
    data, smap = parse_yaml(text.encode("utf-8"), file)
    path = (base_dir / Path(file).name) if base_dir is not None else None
    return _load(data, smap, text, path)


def _version(doc: dict, smap: SourceMap) -> dict:
    if not is_fleet_document(doc):
        raise RecipeError([smap.diagnostic((), "not a fleet: a fleet file starts with "
                                           "'kind: fleet'", "see recipes/tiny-cpu-fleet.yaml")])
    version = doc.get("fleet_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise RecipeError([smap.diagnostic(("fleet_version",) if "fleet_version" in doc else (),
                                           f"fleet_version must be a whole number, got "
                                           f"{version!r}", f"add 'fleet_version: {FLEET_VERSION}'",
                                           prefer_key=True)])
    if version > FLEET_VERSION:
        raise RecipeError([smap.diagnostic(("fleet_version",), f"written for fleet format "
                                           f"{version}, but this mopt reads up to "
                                           f"{FLEET_VERSION}", "update mopt")])
    while version < FLEET_VERSION:
        if version not in MIGRATIONS:
            raise RecipeError([smap.diagnostic(("fleet_version",), f"fleet format {version} "
                                               "is not supported",
                                               f"formats 1 to {FLEET_VERSION} are")])
        doc, version = MIGRATIONS[version](dict(doc)), version + 1
        doc["fleet_version"] = version
    return doc


def _load(data: object, smap: SourceMap, text: str, path: Path | None) -> LoadedFleet:
    doc = _version(data, smap)
    schema_problems = diagnostics_against(fleet_schema(), doc, smap)
    resolved = fill_fleet_defaults(doc)
    if isinstance(resolved.get("router"), dict):
        resolved["router"]["model"] = resolved["router"].get("model") or resolved.get("name")
    structure = structure_rules(resolved, smap)
    if schema_problems:
        raise RecipeError(_unique(schema_problems + structure))
    shared = shared_of(resolved, path)
    instances, problems = _instances(resolved, smap, shared)
    front, problems = None, structure + problems
    if not problems:
        members = {n: i.recipe for n, i in instances.items()}
        problems += share_rules(resolved, members, smap)
        problems += sweep_evidence_rules(resolved, members, smap)
        try:
            front = front_recipe(shared, smap, resolved["router"]["model"],
                                 [i.recipe for i in instances.values()])
        except RecipeError as exc:
            problems += exc.diagnostics
    if problems:
        raise RecipeError(_unique(problems))
    router = resolved["router"]
    spec = RouterSpec(router["port"], router["model"],
                      tuple(Route.of(i, r) for i, r in enumerate(router["routes"])),
                      router.get("fallback"), float(router["startup_timeout_s"]))
    return LoadedFleet(path, text, doc, resolved, smap, instances, spec, front)


def shared_of(resolved: dict, path: Path | None) -> Shared:
    """What the fleet gives every member (and the single server ``mopt split`` derives):
    its name, hardware, workload (defaults filled), SLOs, folder."""
    base_dir = path.resolve().parent if path is not None else Path.cwd()
    workload = fill_defaults(resolved.get("workload") or {},
                             recipe_schema()["properties"]["workload"])
    return Shared(resolved["name"], resolved.get("hardware") or {}, workload,
                  resolved.get("slo") or {}, base_dir, path)


def _instances(resolved: dict, smap: SourceMap,
               shared: Shared) -> tuple[dict[str, Instance], list[Diagnostic]]:
    routes, fallback = resolved["router"]["routes"], resolved["router"].get("fallback")
    classes = workload_classes(shared.workload) or []
    cores = assign_cores(resolved)
    out, problems = {}, []
    for name, inst in resolved["instances"].items():
        mine = instance_classes(routes, fallback, name, classes)
        try:
            recipe = member_recipe(shared, smap, name, inst, cores.get(name), mine)
        except RecipeError as exc:
            problems += exc.diagnostics
            continue
        out[name] = Instance(name, recipe, tuple(cores[name]) if cores.get(name) else None,
                             tuple(mine))
    return out, problems


def _unique(problems: list[Diagnostic]) -> list[Diagnostic]:
    """Each problem once (the shared workload is checked with every member)."""
    seen, out = set(), []
    for problem in problems:
        key = problem.format()
        if key not in seen:
            seen.add(key)
            out.append(problem)
    return out
