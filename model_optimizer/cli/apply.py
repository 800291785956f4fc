"""`mopt apply`: launch vLLM from a recipe, load-test it, archive the run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from model_optimizer.archive import runs_dir
from model_optimizer.archive.report import (
    CLASS_COLUMNS,
    check_lines,
    class_rows,
    fmt,
    steady_line,
    with_interval,
)
from model_optimizer.cli.common import (
    JsonOption,
    RunsDirOption,
    SetOption,
    console,
    err_console,
    handle_errors,
    print_json,
    progress_console,
)
from model_optimizer.cli.current import (
    ForceOption,
    OptionalRecipeArg,
    check_before_launch,
    load_chosen,
)
from model_optimizer.cli.fleet_apply import apply_fleet_command
from model_optimizer.cli.progress import RunProgress
from model_optimizer.errors import EXIT_SLO_FAILED
from model_optimizer.fleet import is_fleet_file
from model_optimizer.history.drift import check_drift
from model_optimizer.recipe import Variation
from model_optimizer.recipe.overrides import parse_value
from model_optimizer.runner import RunOutcome, run_recipe
from model_optimizer.shown import printable
from model_optimizer.signals import terminate_as_interrupt


def summary_table(outcome: RunOutcome) -> Table:
    """The figures of one run as a rich table."""
    metrics = outcome.metrics
    table = Table(title=f"{outcome.run_id}: {outcome.status}", show_edge=False)
    for column in ("metric", "mean", "p50", "p90", "p99"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    for label, key in (("TTFT ms", "ttft"), ("TPOT ms", "tpot"), ("ITL ms", "itl"),
                       ("E2E ms", "e2e")):
        table.add_row(label, *(with_interval(metrics, f"{key}_{s}_ms")
                               for s in ("mean", "p50", "p90", "p99")))
    return table


def class_summary_table(metrics: dict) -> Table | None:
    """Per-class figures as a rich table (None when the run had no classes)."""
    rows = class_rows(metrics)
    if not rows:
        return None
    table = Table(title="per class (ms; token counts are means)", show_edge=False)
    for column in CLASS_COLUMNS:
        table.add_column(column, justify="left" if column in ("class", "SLOs") else "right")
    for row in rows:
        table.add_row(*row)
    return table


def print_outcome(outcome: RunOutcome) -> None:
    """Summary of a run for humans."""
    metrics = outcome.metrics
    if outcome.failure is not None:
        err_console.print(f"[bold red]{escape(outcome.status)}[/]: {escape(outcome.failure.hint)}",
                          highlight=False)
        for line in outcome.failure.evidence[:6]:  # a server's or a log's text
            err_console.print(f"  log: {printable(line, lines=False)}", highlight=False,
                              markup=False)
    if metrics.get("requests"):
        console.print(summary_table(outcome))
        if (per_class := class_summary_table(metrics)) is not None:
            console.print(per_class)
        console.print(
            f"{metrics['completed']} ok / {metrics['failed']} failed in "
            f"{fmt(metrics.get('window_s'), 2)} s: {with_interval(metrics, 'qps', 2)} req/s, "
            f"{with_interval(metrics, 'output_tok_s')} output tok/s, "
            f"goodput {with_interval(metrics, 'goodput_qps', 2)} req/s", highlight=False)
        steady = steady_line(metrics)
        if steady:
            console.print(steady, highlight=False, style="dim")
        for line in check_lines(metrics):
            console.print(line, highlight=False, markup=False)
        if outcome.ok:
            verdict = ("[green]SLOs met[/]" if outcome.slo_met else
                       "[red]SLOs not met:[/] " + "; ".join(metrics.get("slo_violations") or []))
            console.print(verdict, highlight=False)
    console.print(f"archive: {outcome.archive}", highlight=False, markup=False)


@handle_errors
def apply(
    recipe: OptionalRecipeArg = None,
    overrides: SetOption = None,
    runs_dir_opt: RunsDirOption = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Refuse to run when the installed vLLM, the hardware or the GPU "
                         "driver differs from the recipe's validated block, or the model "
                         "folder from its model.pins checkpoint hash (default: warn), until "
                         "`mopt verify` of this revision here holds.")] = False,
    force: ForceOption = False,
    as_json: JsonOption = False,
    speed: Annotated[str | None, typer.Option(
        "--speed", help="Replay workload.trace this much faster, e.g. 2x (the same as --set "
                        "workload.trace_speed=2x).", show_default=False)] = None,
) -> None:
    """Launch vLLM from RECIPE, load-test it and archive the run under runs/.

    Without RECIPE, applies the current recipe (see `mopt status`). Before launching, a
    preflight checks in seconds what would make the launch fail (the accelerator, the model
    and tokenizer, a hub id without network or cache, the port).

    With a quality section (quality.eval_set or lm-eval tasks) the recipe's eval runs on the
    same server after the load test and its figures (and gate, with quality.baseline) are
    reported too.

    Exit codes: 0 the run succeeded and met the recipe's SLOs; 2 bad input, a preflight
    refusal (or drift with --strict); 3 the server failed to start; 4 the run completed but
    missed an SLO or the quality gate; 5 the engine failed during the load; 130 interrupted.
    The vLLM server is always stopped before mopt exits.

    A fleet file (kind: fleet) launches every instance and the router, sends the workload
    to the router's URL and reports per instance too (docs/fleet.md); a routing mismatch
    exits 4.
    """
    if recipe is not None and is_fleet_file(recipe):
        apply_fleet_command(recipe, overrides, runs_dir_opt, as_json, print_outcome)
        return
    if speed is not None:
        overrides = [*(overrides or []), Variation(
            "workload.trace_speed", parse_value("workload.trace_speed", speed),
            "mopt apply --speed")]
    loaded = load_chosen(recipe, overrides, "apply", as_json, runs_dir_opt)
    drift = check_drift(loaded.resolved, strict=strict, base_dir=loaded.base_dir,
                        runs_base=runs_dir(runs_dir_opt))
    for message in drift:
        err_console.print(f"[yellow]drift:[/] {escape(message)}", highlight=False)
    check_before_launch(loaded, force, err_console, runs_dir_opt)
    terminate_as_interrupt()
    total = loaded.resolved["workload"].get("num_requests")
    quality = QualityOnServer(loaded, runs_dir(runs_dir_opt))
    with RunProgress(progress_console(as_json), total=total) as progress:
        quality.on_event = progress
        outcome = run_recipe(loaded, runs_dir(runs_dir_opt), on_event=progress,
                             archive_extra={"drift": drift} if drift else None,
                             while_serving=quality if quality.enabled else None)
    if as_json:
        print_json({**outcome.to_dict(), "quality": quality.to_dict()})
    else:
        print_outcome(outcome)
        quality.print()
    code = outcome.exit_code
    raise typer.Exit(EXIT_SLO_FAILED if code == 0 and quality.failed else code)


class QualityOnServer:
    """Apply's quality report: the recipe's eval on the server the load test used."""

    def __init__(self, loaded, runs_base: Path):
        from model_optimizer.quality import quality_of

        self.loaded, self.runs_base = loaded, runs_base
        self.config = quality_of(loaded)
        self.enabled = self.config.enabled
        self.on_event = None
        self.outcome = None

    def __call__(self, base_url: str) -> None:
        from model_optimizer.quality import evaluate

        self.outcome = evaluate(self.loaded, config=self.config, url=base_url,
                                runs_base=self.runs_base, on_event=self.on_event)

    @property
    def failed(self) -> bool:
        """True when the eval failed or its gate did."""
        if self.outcome is None:
            return False
        gate = self.outcome.gate
        return not self.outcome.result.ok or (gate is not None and not gate.passed)

    def to_dict(self) -> dict | None:
        """The eval's JSON summary (None without a quality section)."""
        return self.outcome.to_dict() if self.outcome else None

    def print(self) -> None:
        """The eval's figures, comparison and gate."""
        if self.outcome is not None:
            from model_optimizer.cli.eval import print_eval

            console.print("quality:", highlight=False)
            print_eval(self.outcome)
