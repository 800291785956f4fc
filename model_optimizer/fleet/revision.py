"""A new revision of a fleet file with its routing table from a measured decision, the
figures beside it (``routing_evidence``), written like a recipe revision.

The text is the given file's, round-tripped (comments, key order and flow style kept): each
route's ``to`` set to the decided instance, ``revision`` bumped, the ``routing_evidence``
block replaced. The router's recognition of each class (model, tag, length) and the
fallback are kept: a class that relies on the fallback cannot be sent elsewhere without a
rule the router recognizes, which is refused with the fix. The text is loaded and checked
as a fleet before it is written; the number is taken under the lock recipe revisions use.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

from model_optimizer.errors import UsageError
from model_optimizer.fleet.load import load_fleet_text
from model_optimizer.fleet.spec import BY_FALLBACK, LoadedFleet
from model_optimizer.fsutil import atomic_update_text
from model_optimizer.recipe.writer import next_revision, replace_block, revision_lock, round_trip

EVIDENCE = "routing_evidence"


def route_changes(fleet: LoadedFleet, assignment: dict[str, str]) -> dict[int, str]:
    """``routes[i]`` -> its new instance, for ``assignment`` (class -> instance); UsageError
    for a class the rules cannot send where it must go."""
    routes = {r.request_class: r for r in fleet.router.routes}
    fallback, changes, problems = fleet.router.fallback, {}, []
    for name, to in assignment.items():
        route = routes.get(name)
        if route is None or route.by == BY_FALLBACK:
            if to != fallback:
                problems.append(f"class '{name}' has no rule the router recognizes (it "
                                f"relies on the fallback '{fallback}') but must go to "
                                f"'{to}': give it a route by model: or tag: in "
                                f"{fleet.path or 'the fleet file'}, then run this again")
            continue
        if route.to != to:
            changes[route.index] = to
    if problems:
        raise UsageError("; ".join(problems))
    return changes


def render_routes(text: str, changes: dict[int, str], evidence: dict, number: int) -> str:
    """``text`` with ``routes[i].to`` changed, ``revision: number`` and the evidence block."""
    rt, data = round_trip(text)
    bump(data, number)
    for index, to in changes.items():
        data["router"]["routes"][index]["to"] = to
    replace_block(data, EVIDENCE, evidence)
    out = io.StringIO()
    rt.dump(data, out)
    return out.getvalue()


def write_routing(fleet: LoadedFleet, assignment: dict[str, str], evidence: dict,
                  output: str | Path | None = None) -> tuple[Path, int, str]:
    """Write the next revision of ``fleet`` (over its file, or to ``output``) routed by
    ``assignment`` with ``evidence`` beside it; its path, number and text. RecipeError (the
    new text's problems, file:line) or UsageError: nothing is written."""
    changes = route_changes(fleet, assignment)

    def check(written: LoadedFleet) -> None:
        wrong = {c: to for c, to in assignment.items()
                 if c in _served(written) and _served(written)[c] != to}
        if wrong:  # a safety net: the rules already check the table against the evidence
            raise UsageError(f"the revision would not route as decided: {wrong}")

    return write_fleet_revision(
        fleet, lambda text, number: render_routes(text, changes, evidence, number), check,
        output)


def bump(data, number: int) -> None:
    """``revision: number`` in a round-tripped fleet document (added after ``name``)."""
    if "revision" in data:
        data["revision"] = number
    else:
        data.insert(list(data).index("name") + 1 if "name" in data else 0, "revision", number)


def write_fleet_revision(fleet: LoadedFleet, render: Callable[[str, int], str],
                         check: Callable[[LoadedFleet], None],
                         output: str | Path | None = None) -> tuple[Path, int, str]:
    """Write the next revision of ``fleet`` (over its file, or to ``output``): under the
    recipe revisions' lock, ``render(source text, number)``'s text loaded and checked as a
    fleet (RecipeError, file:line) and by ``check`` (UsageError), then written atomically;
    its path, number and text. Nothing is written when a check fails."""
    target = Path(output) if output is not None else fleet.path
    if target is None:
        raise UsageError("a fleet read from text needs an output file for its revision")
    with revision_lock(target):
        number = next_revision(fleet, target)
        text = render(fleet.source_text, number)
        check(load_fleet_text(text, str(target), base_dir=target.resolve().parent))
        atomic_update_text(target, text)
    return target, number, text


def _served(fleet: LoadedFleet) -> dict[str, str]:
    """Class -> the instance its requests reach (its rule's, or the fallback)."""
    out = {}
    for route in fleet.router.routes:
        out[route.request_class] = (fleet.router.fallback if route.by == BY_FALLBACK
                                    else route.to)
    return out
