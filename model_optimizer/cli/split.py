"""`mopt split FLEET`: should this traffic be split over the fleet's instances, or served by one
server? Both measured in alternating rounds (with ``--replicas``, a third arm: the single server
cut into replicas behind the router with no class rule); per class, the paired change with its
interval, and the verdict in words (printing). With ``--sweep-instances``: each instance's
max_num_seqs swept alone, and the fleet's next revision written with the chosen values."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from model_optimizer.archive import runs_dir
from model_optimizer.archive.report import fmt
from model_optimizer.cli.common import (
    JsonOption,
    RunsDirOption,
    console,
    err_console,
    handle_errors,
    print_json,
    progress_console,
)
from model_optimizer.cli.outcomes import print_notice
from model_optimizer.cli.progress import RunProgress, SweepProgress
from model_optimizer.errors import UsageError
from model_optimizer.fleet import load_fleet
from model_optimizer.fleet.split import ROUND_COLUMNS, SplitWindow, figures_row
from model_optimizer.search.sweep.flags import SweepFlags
from model_optimizer.usecase.fleet_sweep import FleetSweepOutcome, sweep_instances
from model_optimizer.usecase.split import DEFAULT_ROUNDS, MIN_ROUNDS, SplitOutcome, split
from model_optimizer.usecase.split_paired import HEADLINE
from model_optimizer.usecase.split_verdict import (
    ARM_WORDS,
    LABELS,
    NO_SPLIT,
    SPLIT,
    ClassVerdict,
)


class SplitProgress(RunProgress):
    """Each window's runs as `mopt apply` shows them, and a line when a window ends."""

    def window(self, window: SplitWindow) -> None:
        """After each window: its round, arm and status."""
        self._log(f"round {window.round}, {window.arm}: {window.status}")


def rounds_table(outcome: SplitOutcome) -> Table:
    """Every window's figures, overall and per class."""
    table = Table(title="each window (ms; SLO: the class's own bounds)", show_edge=False)
    for column in ROUND_COLUMNS:
        table.add_column(column, justify="left" if column in ("arm", "class", "SLO")
                         else "right")
    for window in outcome.run.windows:
        for name in [None, *sorted(window.classes)]:
            table.add_row(*figures_row(window, name))
    return table


def changes_tables(outcome: SplitOutcome) -> list[Table]:
    """Per class and figure: the fleet against one server, paired by round; with the
    replicas, the replicas against one server and the fleet against the replicas."""
    verdict = outcome.verdict
    tables = [changes_table(HEADLINE, verdict.classes, verdict.overall)]
    return tables + [changes_table(c.arms, c.classes, c.overall)
                     for c in verdict.comparisons]


def changes_table(arms: tuple[str, str], classes: tuple[ClassVerdict, ...],
                  overall: ClassVerdict | None) -> Table:
    """Per class and figure: ``arms[0]`` against ``arms[1]``, paired by round."""
    arm, base = arms
    table = Table(title=f"{arm} / {base} - 1, paired by round (each end a one-sided 95% "
                        "bound)", show_edge=False)
    for column in ("class", "figure", "pairs", "change", "interval", "outcome"):
        table.add_column(column, justify="right" if column in ("pairs", "change") else "left")
    for item in [*classes, *([overall] if overall else [])]:
        slo = (f" (SLO: {ARM_WORDS[base]} {_slo(item.base_slo)}, {ARM_WORDS[arm]} "
               f"{_slo(item.arm_slo)})")
        for number, change in enumerate(item.changes):
            table.add_row(escape(item.request_class) + (slo if number == 0 else ""),
                          LABELS[change.figure], str(change.pairs),
                          "-" if change.change is None else f"{change.change:+.1%}",
                          "-" if change.low is None else f"[{change.low:+.1%}, "
                                                         f"{change.high:+.1%}]",
                          change.outcome)
    return table


def _slo(met: bool | None) -> str:
    return "-" if met is None else ("met" if met else "missed")


def print_split(outcome: SplitOutcome) -> None:
    """The windows, the paired changes, the verdict and where it is archived."""
    console.print(rounds_table(outcome))
    for table in changes_tables(outcome):
        console.print(table)
    colour = {SPLIT: "green", NO_SPLIT: "yellow"}.get(outcome.verdict.verdict, "red")
    # one line at any width, so the verdict can be read (and grepped) whole
    console.print(f"[bold {colour}]{escape(outcome.verdict.words)}[/]", highlight=False,
                  soft_wrap=True)
    failed = outcome.run.failed
    if failed is not None:
        console.print(f"stopped: a window failed ({escape(failed.status)}); its archive is "
                      f"{escape(str(failed.archive))}", highlight=False)
    console.print(f"archive: {escape(str(outcome.run.archive))}", highlight=False,
                  soft_wrap=True)


def sweeps_table(outcome: FleetSweepOutcome) -> Table:
    """Each instance's sweep: the value chosen, resolved or not, its figures, its archive."""
    table = Table(title="each instance's max_num_seqs, swept alone under its own classes' "
                        "traffic", show_edge=False)
    for column in ("instance", "max_num_seqs", "resolved", "req/s", "TTFT p99", "sweep"):
        table.add_column(column, justify="right" if column in ("max_num_seqs", "req/s",
                                                               "TTFT p99") else "left")
    for item in outcome.sweeps:
        resolved = {True: "yes", False: "[yellow]written, not resolved[/]"}.get(
            item.resolved, f"[red]{escape(item.status)}[/]")
        table.add_row(item.name, "-" if item.value is None else str(item.value), resolved,
                      fmt(item.figures.get("qps"), 2), fmt(item.figures.get("ttft_p99_ms")),
                      escape(item.run_id))
    return table


def print_sweeps(outcome: FleetSweepOutcome) -> None:
    """The instances' sweeps, each one's reason, the fleet revision (or why none)."""
    console.print(sweeps_table(outcome))
    for item in outcome.sweeps:
        console.print(f"{item.name}: {escape(item.reason)}", highlight=False, soft_wrap=True)
    if outcome.written is not None:
        console.print(f"[green]wrote revision {outcome.revision} of the fleet to "
                      f"{escape(str(outcome.written))}[/]", highlight=False, soft_wrap=True)
    else:
        err_console.print(f"[bold red]no fleet revision written[/]: "
                          f"{escape(outcome.refused or '')}", highlight=False, soft_wrap=True)
    console.print(f"archive: {escape(str(outcome.archive))}", highlight=False, soft_wrap=True)


def _sweep_instances(fleet_path: Path, single: Path | None, rounds: int | None, strict: bool,
                     output: Path | None, budget: float | None, runs: Path,
                     as_json: bool) -> None:
    """--sweep-instances: the sweeps and the fleet revision, instead of the rounds."""
    if single is not None or rounds is not None:
        raise UsageError("--sweep-instances sweeps each instance alone and runs no rounds: "
                         "give no --single or --rounds with it (run `mopt split FLEET` on "
                         "the revision it writes to compare it with one server)")
    fleet = load_fleet(fleet_path)  # a broken file: exit 2 before anything starts
    with SweepProgress(progress_console(as_json)) as progress:
        outcome = sweep_instances(fleet, flags=SweepFlags(budget=budget), strict=strict,
                                  output=output, runs_base=runs, on_event=progress,
                                  on_notice=print_notice)
    if as_json:
        print_json(outcome.to_dict())
    else:
        print_sweeps(outcome)
    raise typer.Exit(outcome.exit_code)


@handle_errors
def split_command(
    fleet_path: Annotated[Path, typer.Argument(metavar="FLEET", help="Fleet file (kind: fleet).",
                                               show_default=False)],
    single: Annotated[Path | None, typer.Option(
        "--single", metavar="RECIPE", help="The one server to compare with (its model and "
        "engine; it gets the whole machine, the fleet's workload and SLOs). Default: the "
        "fleet's first instance with every core, the sum of the shares and of max_num_seqs, "
        "the longest max_model_len.", show_default=False)] = None,
    rounds: Annotated[int | None, typer.Option(
        "--rounds", min=MIN_ROUNDS, help="Rounds; each is one window of each arm, the order "
                                         "rotating from round to round.  [default: "
                                         f"{DEFAULT_ROUNDS}]", show_default=False)] = None,
    replicas: Annotated[bool, typer.Option(
        "--replicas", help="A third arm: the single server cut into one replica per fleet "
        "instance (replica i on instance i's cores and share, max_num_seqs the single "
        "server's / the instances, rounded up), behind the same router as one model group "
        "balanced least-busy, with no class rule; reported as the replicas against one "
        "server and the fleet against the replicas (is the class rule worth more than "
        "replication?). The headline verdict stays the fleet's against one server.")
    ] = False,
    sweep_instances_opt: Annotated[bool, typer.Option(
        "--sweep-instances", help="Instead of the rounds: sweep each instance's max_num_seqs "
        "alone under its own classes' traffic (its cores, its share), then write the fleet's "
        "next revision with the chosen values and the figures beside them (sweep_evidence).")
    ] = False,
    strict: Annotated[bool, typer.Option(
        "--strict", help="--sweep-instances: write no fleet revision when an instance's "
                         "choice is not resolved.")] = False,
    output: Annotated[Path | None, typer.Option(
        "--output", help="--sweep-instances: write the fleet's revision here instead of over "
                         "FLEET.", show_default=False)] = None,
    budget: Annotated[float | None, typer.Option(
        "--budget", min=0.1, metavar="MINUTES", help="--sweep-instances: each instance's "
        "sweep budget in minutes, its confirmation included (default: the member recipe's "
        "sweep.budget, 15).", show_default=False)] = None,
    runs_dir_opt: RunsDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Split or not: the fleet's workload against one server and against the fleet.

    Named beside `mopt apply FLEET` (run the fleet) and `mopt route FLEET` (decide where
    each class goes): `split` answers the question before both, whether to split the traffic
    at all. It runs the same seeded requests against one server (launched alone) and the
    fleet through its router, in --rounds rounds of one window each, the order alternating
    so drift hits both alike (with --replicas, a third arm and the order rotating: S F R,
    F R S, R S F); then, per class, the fleet's change in req/s, TTFT p50/p99
    and E2E p99 with its interval across the rounds, each arm's SLO verdict, and the
    verdict: split (and for which class), do not split, or not resolved (with the rounds
    that would resolve it); with --replicas, the same paired changes for the replicas
    against one server and the fleet against the replicas, said after the verdict.
    Everything is archived as one experiment. See docs/fleet.md,
    "Split or not: the experiment".

    With --sweep-instances, no rounds: each instance's max_num_seqs is swept alone as the
    fleet serves it (its cores, its share, the workload of the classes routed to it), each
    instance's revision archived, and one revision of the fleet file written with every
    chosen value and the sweeps' figures (sweep_evidence); --strict writes none when a
    choice is not resolved.

    Exit codes: 0 a verdict (split or do not split), or (--sweep-instances) the fleet
    revision written; 1 not resolved; 2 bad input; 3 a server or the router failed to
    start; 4 (--sweep-instances) no fleet revision written (a sweep chose nothing, or
    --strict); 5 a window failed; 130 interrupted.
    """
    if sweep_instances_opt:
        if replicas:
            raise UsageError("--replicas is an arm of the rounds; --sweep-instances runs none")
        _sweep_instances(fleet_path, single, rounds, strict, output, budget,
                         runs_dir(runs_dir_opt), as_json)
    if strict or output is not None or budget is not None:
        raise UsageError("--strict, --output and --budget go with --sweep-instances (the "
                         "rounds sweep nothing and write no revision)")
    progress = SplitProgress(progress_console(as_json), label="split: ")
    with progress:
        outcome = split(fleet_path, single=single, rounds=rounds or DEFAULT_ROUNDS,
                        runs_base=runs_dir(runs_dir_opt), on_event=progress,
                        on_window=progress.window, replicas=replicas)
    if as_json:
        print_json(outcome.to_dict())
    else:
        print_split(outcome)
    raise typer.Exit(outcome.exit_code)
