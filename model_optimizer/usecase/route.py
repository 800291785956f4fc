"""``mopt route FLEET`` below the command line: the fleet loaded, interrupts, both
instances evaluated, each request class routed by the quality gate per class, and the
fleet's next revision written (``quality/fleet_route.py``).

    outcome = route(Path("fleet.yaml"), fast="fast", eval_set=Path("classes.jsonl"))
    outcome.decision.assignment(), outcome.revision, outcome.exit_code
"""

from __future__ import annotations

from pathlib import Path

from model_optimizer.archive import runs_dir
from model_optimizer.events import EventCallback
from model_optimizer.fleet import LoadedFleet, load_fleet
from model_optimizer.quality.fleet_route import RouteOutcome, route_by_precision
from model_optimizer.quality.precision import MIN_ITEMS
from model_optimizer.signals import terminate_as_interrupt


def route(fleet: Path | LoadedFleet, *, fast: str | None = None, precise: str | None = None,
          eval_set: Path | None = None, urls: dict[str, str] | None = None,
          min_items: int = MIN_ITEMS, output: Path | None = None,
          runs_base: Path | None = None,
          on_event: EventCallback | None = None) -> RouteOutcome:
    """Evaluate ``fleet``'s precise instance, then its fast one against it (each launched
    alone as the fleet serves it, or the server at ``urls[name]``), judge each eval-set
    class (``eval_set``, default the fleet's quality.eval_set) with the gate's thresholds,
    and write the fleet's next revision (to ``output``, default over the fleet file): a
    class that fails on the fast instance, or has fewer than ``min_items`` items, goes to
    the precise one. Both evals are archived under ``runs_base``.

    RecipeError for a file that is not a valid fleet; UsageError (exit 2, nothing
    archived) for no eval set, ``fast`` and ``precise`` the same instance, a URL for no
    instance. SIGTERM, SIGHUP and SIGQUIT end it as Ctrl-C does. Its exit code: 0 written,
    3 an instance did not start, 5 an eval failed (``failure``: why; nothing written)."""
    fleet = fleet if isinstance(fleet, LoadedFleet) else load_fleet(fleet)
    terminate_as_interrupt()
    return route_by_precision(
        fleet, runs_dir(runs_base), fast=fast, precise=precise,
        eval_set=str(eval_set.resolve()) if eval_set else None, urls=urls,
        min_items=min_items, output=output, on_event=on_event)
