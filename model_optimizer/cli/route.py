"""`mopt route FLEET`: route each request class to the fast or the precise instance by the
quality gate per class, and write the fleet's next revision with the figures (printing)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from model_optimizer.archive import runs_dir
from model_optimizer.cli.common import (
    JsonOption,
    RunsDirOption,
    console,
    err_console,
    handle_errors,
    print_json,
    progress_console,
)
from model_optimizer.cli.progress import EvalProgress
from model_optimizer.errors import UsageError
from model_optimizer.events import Event, QualityBaseline, QualityEval
from model_optimizer.quality.fleet_route import RouteOutcome
from model_optimizer.quality.precision import MIN_ITEMS, PrecisionDecision
from model_optimizer.quality.report import fmt
from model_optimizer.usecase.route import route as run_route


class RouteProgress(EvalProgress):
    """The eval's progress, and which instance is being evaluated."""

    def __call__(self, event: Event) -> None:
        if isinstance(event, QualityBaseline):
            self._log("evaluating the precise instance (the reference) ...")
        elif isinstance(event, QualityEval):
            self._log(f"evaluating the fast {', '.join(event.fields)} against it ...")
        else:
            super().__call__(event)


def parse_urls(values: list[str] | None) -> dict[str, str]:
    """``NAME=URL`` options as a mapping; UsageError for one without ``=``."""
    out = {}
    for value in values or []:
        name, sep, url = value.partition("=")
        if not sep or not name or not url:
            raise UsageError(f"--url {value}: give INSTANCE=URL, e.g. fast=http://127.0.0.1:8001")
        out[name] = url
    return out


def decision_table(decision: PrecisionDecision) -> Table:
    """One row per class: where it goes, the verdict, the figures it rests on."""
    table = Table(title=f"fast {decision.fast} against precise {decision.precise}, per class",
                  show_edge=False)
    for column in ("class", "to", "verdict", "items", "accuracy precise -> fast", "drop",
                   "noise", "exact match", "mean KL"):
        table.add_column(column, justify="left" if column in ("class", "to", "verdict")
                         else "right")
    for item in decision.classes:
        f = item.figures
        accuracy = (f"{f['baseline_accuracy']:.3f} -> {f['accuracy']:.3f}"
                    if "accuracy" in f else "-")
        colour = "green" if item.to == decision.fast else "yellow"
        table.add_row(item.request_class, f"[{colour}]{item.to}[/]", item.verdict,
                      str(item.items), accuracy, fmt(f.get("accuracy_drop")),
                      fmt(f.get("accuracy_noise")), fmt(f.get("exact_match_rate")),
                      fmt(f.get("mean_kl")))
    return table


def print_route(outcome: RouteOutcome) -> None:
    """The decision, each class's reason, and the revision written."""
    if outcome.failure:
        err_console.print(f"[bold red]no revision written[/]: {escape(outcome.failure)}",
                          highlight=False)
        return
    decision = outcome.decision
    console.print(decision_table(decision))
    for item in decision.classes:
        console.print(f"{item.request_class} -> {item.to}: {escape(item.reason)}",
                      highlight=False)
    if decision.ignored:
        console.print(f"eval-set classes the fleet has no requests of (ignored): "
                      f"{', '.join(decision.ignored)}", highlight=False)
    console.print(f"wrote revision {outcome.revision} of the fleet to {outcome.output}",
                  highlight=False)


@handle_errors
def route(
    fleet_path: Annotated[Path, typer.Argument(metavar="FLEET", help="Fleet file (kind: fleet).",
                                               show_default=False)],
    eval_set: Annotated[Path | None, typer.Option(
        "--eval-set", help="JSONL eval set whose items carry classes (default: the fleet's "
                           "quality.eval_set).", show_default=False)] = None,
    fast: Annotated[str | None, typer.Option(
        "--fast", help="The fast (quantized) instance.", show_default=False)] = None,
    precise: Annotated[str | None, typer.Option(
        "--precise", help="The precise instance (baseline or a conservative scheme), the "
                          "gate's reference.", show_default=False)] = None,
    url: Annotated[list[str] | None, typer.Option(
        "--url", metavar="INSTANCE=URL", help="Evaluate this running server for INSTANCE "
                                              "instead of launching it (repeatable).",
        show_default=False)] = None,
    min_items: Annotated[int, typer.Option(
        "--min-items", min=1, help="Eval items a class needs to be judged; with fewer it "
                                   "goes to the precise instance.")] = MIN_ITEMS,
    output: Annotated[Path | None, typer.Option(
        "--output", help="Write the new revision here instead of over FLEET.",
        show_default=False)] = None,
    runs_dir_opt: RunsDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Route each request class to the fast or the precise instance by measured quality.

    Evaluates the precise instance, then the fast one against it (each launched alone as
    the fleet serves it, or at --url INSTANCE=URL), judges every eval-set class on its own
    items with the quality gate's thresholds, and writes the fleet's next revision: a
    class whose gate fails on the fast instance, or with fewer than --min-items items, goes
    to the precise instance, the others to the fast one; the figures are written beside
    the routes (routing_evidence). See docs/fleet.md, "Precision routing".

    Exit codes: 0 routed and written; 2 bad input; 3 an instance failed to start; 5 an eval
    failed (nothing written); 130 interrupted.
    """
    urls = parse_urls(url)
    with RouteProgress(progress_console(as_json), label="route: ") as progress:
        outcome = run_route(fleet_path, fast=fast, precise=precise, eval_set=eval_set,
                            urls=urls, min_items=min_items, output=output,
                            runs_base=runs_dir(runs_dir_opt), on_event=progress)
    if as_json:
        print_json(outcome.to_dict())
    else:
        print_route(outcome)
    raise typer.Exit(outcome.exit_code)
