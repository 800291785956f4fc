"""How the commands print what a use case returns: a run's figures (apply, bench, verify,
rollback --apply), an eval's (apply with a quality section, eval), a verification's, and the
notices said on the way. Shared by the command modules, which never import each other."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table

from model_optimizer.archive.report import (
    CLASS_COLUMNS,
    check_lines,
    class_rows,
    fmt,
    steady_line,
    with_interval,
)
from model_optimizer.cli.common import console, err_console
from model_optimizer.quality.evaluate import EvalOutcome
from model_optimizer.quality.report import FIDELITY_ROWS
from model_optimizer.quality.report import fmt as quality_fmt
from model_optimizer.runner import RunOutcome
from model_optimizer.shown import printable
from model_optimizer.usecase.notices import DRIFT, INIT, PREFLIGHT, Notice
from model_optimizer.verify import VerifyResult, report_lines


def print_notice(notice: Notice) -> None:
    """A use case's notice as it comes: drift and preflight warnings in yellow, and remarks,
    on stderr; a file written first (``init``) on stdout, with the command's own output."""
    if notice.kind == DRIFT:
        err_console.print(f"[yellow]drift:[/] {escape(notice.text)}", highlight=False,
                          soft_wrap=True)
    elif notice.kind == PREFLIGHT:
        err_console.print(f"preflight: {notice.text}", style="yellow", highlight=False,
                          markup=False, soft_wrap=True)
    elif notice.kind == INIT:
        console.print(notice.text, highlight=False, markup=False)
    else:
        err_console.print(notice.text, highlight=False, markup=False)


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


def print_eval(outcome: EvalOutcome) -> None:
    """The eval's figures, comparison and gate for humans."""
    result = outcome.result
    figures = result.figures()
    if result.failure:
        err_console.print(f"[bold red]{result.status}[/]: {result.failure}", highlight=False)
    line = f"{figures['items']} items x {figures['repeats']} repeat(s)"
    if figures["accuracy"] is not None:
        line += (f"; task accuracy {figures['accuracy']:.3f} "
                 f"(spread {figures['accuracy_spread']:.3f})")
    for task, score in figures["lm_eval"].items():
        line += f"; lm-eval {task} {score['metric']} {score['value']:.3f}"
    console.print(line, highlight=False)
    if outcome.comparison is not None:
        table = Table(title=f"against baseline {outcome.comparison.baseline_run}",
                      show_edge=False)
        table.add_column("figure")
        table.add_column("value", justify="right")
        values = outcome.comparison.figures()
        for label, key in FIDELITY_ROWS:
            table.add_row(label, quality_fmt(values.get(key)))
        if "accuracy" in values:
            table.add_row("task accuracy, baseline -> candidate",
                          f"{values['baseline_accuracy']:.3f} -> {values['accuracy']:.3f}")
        console.print(table)
    if outcome.gate is not None:
        colour = "green" if outcome.gate.passed else "red"
        console.print(f"[{colour}]{outcome.gate.summary}[/]", highlight=False)
    console.print(f"archive: {result.archive}", highlight=False)


def print_verification(result: VerifyResult) -> None:
    """The measured run, then the verification side by side, the verdict and what next."""
    print_outcome(result.outcome)
    console.print("")
    for line in report_lines(result):
        style = ("green" if line.startswith("HOLDS") else "bold red"
                 if line.startswith(("REGRESSED", "NOT ")) else None)
        console.print(line, style=style, highlight=False, markup=False, soft_wrap=True)
