"""`mopt sweep`: relaunch vLLM with growing values of one knob, choose, confirm, write."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml

from model_optimizer.archive import runs_dir
from model_optimizer.archive.report import fmt
from model_optimizer.cli.common import (
    JsonOption,
    ModelConfigOption,
    NoQualityGateOption,
    RevisionOutputOption,
    RunsDirOption,
    SetOption,
    err_console,
    handle_errors,
    progress_console,
)
from model_optimizer.cli.completion import complete_search
from model_optimizer.cli.current import ForceOption, OptionalRecipeArg, SearchArgs, check_resume
from model_optimizer.cli.progress import SearchProgress, run_search, steps_text
from model_optimizer.errors import UsageError
from model_optimizer.events import (
    Event,
    KneeFitted,
    ProbeFailed,
    ProbeServerStarted,
    SweepConfirm,
    SweepConfirmed,
    SweepSkipped,
    SweepStep,
    SweepStepDone,
)
from model_optimizer.recipe.sweep_rules import DEFAULT_PARAM, SWEEPABLE, strategy_help
from model_optimizer.sweep.flags import SweepFlags

if TYPE_CHECKING:
    from model_optimizer.sweep.loop import SweepOutcome


class SweepProgress(SearchProgress):
    """Search progress plus the sweep's own events: which step, which value, and why."""

    noun = "sweep"

    def handlers(self) -> dict[type[Event], Callable[[Any], None]]:
        """The sweep's events: each step, its result, planner skips, the confirmation."""
        return {SweepStep: self._on_step, SweepStepDone: self._on_step_done,
                SweepSkipped: self._on_skipped, SweepConfirm: self._on_confirm,
                SweepConfirmed: self._on_confirmed, ProbeServerStarted: self._on_probe_server,
                ProbeFailed: self._on_probe_failed, KneeFitted: self._on_knee}

    def _on_step(self, event: SweepStep) -> None:
        self._log(f"step {event.index}: {event.value} ({event.reason})"
                  f"{steps_text(event.done, event.total, event.eta_s)}")

    def _on_step_done(self, event: SweepStepDone) -> None:
        metric = fmt(event.metric, 2) if event.metric is not None else "-"
        if event.half_width is not None and event.metric is not None:
            metric += f" ± {event.half_width:.2f}"
        extra = f", {event.failure}" if event.failure else ""
        self._log(f"  -> {event.status}{extra}, objective {metric}")

    def _on_probe_server(self, event: ProbeServerStarted) -> None:
        self._log(f"probe-scan: one server at max_num_seqs={event.max_num_seqs}, the "
                  "concurrency scanned on it")

    def _on_probe_failed(self, event: ProbeFailed) -> None:
        self._log(event.reason)

    def _on_skipped(self, event: SweepSkipped) -> None:
        self._log(f"  skipped {event.value} without a launch: {event.reason}")

    def _on_knee(self, event: KneeFitted) -> None:
        self._log(f"fitted knee: {event.verdict}")

    def _on_confirm(self, event: SweepConfirm) -> None:
        self._log(f"confirming {event.value} with a {event.duration_s:.0f} s sustained run")

    def _on_confirmed(self, event: SweepConfirmed) -> None:
        verdict = "passed" if event.ok else "rejected: " + "; ".join(event.problems)
        if event.shortfall:
            verdict += f"; NOT RESOLVED: {event.shortfall}"
        self._log(f"  -> {verdict}")


def _values(text: str | None) -> tuple | None:
    if text is None:
        return None
    return tuple(yaml.safe_load(item.strip()) for item in text.split(",") if item.strip())


@handle_errors
def sweep(
    recipe: OptionalRecipeArg = None,
    param: Annotated[str | None, typer.Option(
        help=f"Engine knob to sweep, one of {', '.join(SWEEPABLE)} (default: the recipe's "
             f"sweep.param, {DEFAULT_PARAM}).")] = None,
    start: Annotated[float | None, typer.Option(help="First value.")] = None,
    growth: Annotated[float | None, typer.Option(help="Factor between values (default 2).")]
    = None,
    step: Annotated[float | None, typer.Option(help="Add this instead of multiplying.")] = None,
    max_value: Annotated[float | None, typer.Option("--max", help="Largest value tried.")]
    = None,
    values: Annotated[str | None, typer.Option(help="Comma-separated values for categorical "
                                               "knobs, e.g. auto,fp8.")] = None,
    strategy: Annotated[str | None, typer.Option(
        help=strategy_help())] = None,
    budget: Annotated[float | None, typer.Option(
        min=0.1, help="Minutes to spend searching and deciding (default: the recipe's "
                      "sweep.budget, 15): the top candidates are measured interleaved, a pair "
                      "of windows at a time, until the choice is resolved or this is spent.")]
    = None,
    strict: Annotated[bool, typer.Option(
        "--strict", help="Write nothing when the choice is not resolved (the noise unknown, "
                         "the margin not shown within the budget, the fitted knee's band too "
                         "wide, the sustained run short): exit 4.")] = False,
    output: RevisionOutputOption = None,
    model_config: ModelConfigOption = None,
    resume: Annotated[Path | None, typer.Option(help="Continue the interrupted sweep in this "
                                                "runs/ folder.",
                                                autocompletion=complete_search)] = None,
    overrides: SetOption = None,
    runs_dir_opt: RunsDirOption = None,
    force: ForceOption = False,
    no_quality_gate: NoQualityGateOption = False,
    as_json: JsonOption = False,
) -> None:
    """Sweep one engine knob: grow it until throughput plateaus (by 95% intervals), memory
    runs out or an SLO breaks, bisect, re-measure the top candidates interleaved until the
    choice is resolved or the budget is spent, confirm the knee
    with a sustained run, and write a new recipe revision. max_num_seqs is scanned on one
    server (probe-scan) where valid.

    Without RECIPE, sweeps the current recipe (see `mopt status`). A preflight checks in
    seconds what would make the launches fail before the first one.

    A knob that changes the model's answers (kv_cache_dtype) needs the recipe's quality
    gate (quality.eval_set and thresholds), or --no-quality-gate.

    Exit codes: 0 a revision was written; 2 bad input or a preflight refusal; 4 no value
    met the SLOs; 130 interrupted (continue with --resume).
    """
    from model_optimizer.signals import terminate_as_interrupt

    terminate_as_interrupt()
    progress = SweepProgress(progress_console(as_json))
    args = SearchArgs(recipe=recipe, resume=resume, overrides=overrides,
                      runs_dir=runs_dir_opt, output=output, model_config=model_config,
                      force=force, no_quality_gate=no_quality_gate)
    flags = SweepFlags(param=param, start=start, growth=growth, step=step, max=max_value,
                       values=_values(values), strategy=strategy, strict=strict,
                       budget=budget)
    run_search(lambda: _run(args, flags, progress), progress, "sweep",
               "report.md, summary.csv, plot.png", as_json)


def _run(args: SearchArgs, flags: SweepFlags, progress: SweepProgress) -> SweepOutcome:
    from model_optimizer.quality.search_gate import require_gate
    from model_optimizer.sweep.loop import resume_sweep, start_sweep

    if args.resume is not None:
        if args.recipe is not None or args.overrides:
            raise UsageError("--resume continues a sweep with its archived recipe and "
                             "settings; give no RECIPE or --set with it")
        check_resume(args.resume, args.force)
        return resume_sweep(args.resume, on_event=progress)
    loaded = args.prepare("sweep", progress.console is err_console)
    param = flags.param or loaded.resolved["sweep"]["param"]
    require_gate(loaded, [f"engine.{param}"], args.no_quality_gate, "mopt sweep")
    return start_sweep(loaded, runs_dir(args.runs_dir), flags=flags, output=args.output,
                       model_config=args.model_config, on_event=progress)
