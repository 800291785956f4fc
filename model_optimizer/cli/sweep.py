"""`mopt sweep`: relaunch vLLM with growing values of one knob, choose, confirm, write."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
import yaml

from model_optimizer.archive import runs_dir
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
from model_optimizer.cli.current import (
    ForceOption,
    OptionalRecipeArg,
    SearchArgs,
    load_chosen,
)
from model_optimizer.cli.outcomes import print_notice
from model_optimizer.cli.progress import SweepProgress, run_search
from model_optimizer.recipe.sweep_rules import DEFAULT_PARAM, SWEEPABLE, strategy_help
from model_optimizer.search.sweep.flags import SweepFlags
from model_optimizer.usecase.sweep import SWEEP_FILES
from model_optimizer.usecase.sweep import sweep as run_sweep

if TYPE_CHECKING:
    from model_optimizer.search.sweep.loop import SweepOutcome


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
        min=0.1, help="Minutes the sweep may take, its confirmation included (default: "
                      "the recipe's sweep.budget, 15): no window or launch starts that the "
                      "time left cannot hold; the top candidates are measured interleaved, a "
                      "pair of windows at a time, until the choice is resolved or this is "
                      "spent.")]
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
    progress = SweepProgress(progress_console(as_json))
    args = SearchArgs(recipe=recipe, resume=resume, overrides=overrides,
                      runs_dir=runs_dir_opt, output=output, model_config=model_config,
                      force=force, no_quality_gate=no_quality_gate)
    flags = SweepFlags(param=param, start=start, growth=growth, step=step, max=max_value,
                       values=_values(values), strategy=strategy, strict=strict,
                       budget=budget)
    run_search(lambda: _run(args, flags, progress), progress, "sweep", SWEEP_FILES, as_json)


def _run(args: SearchArgs, flags: SweepFlags, progress: SweepProgress) -> SweepOutcome:
    if args.resume is not None:  # the use case refuses a RECIPE or --set beside it
        return run_sweep(args.recipe, overrides=args.overrides, force=args.force,
                         resume=args.resume, on_event=progress, on_notice=print_notice)
    loaded = load_chosen(args.recipe, args.overrides, "sweep",
                         progress.console is err_console, args.runs_dir)
    return run_sweep(loaded, flags, runs_base=runs_dir(args.runs_dir), output=args.output,
                     model_config=args.model_config, force=args.force,
                     no_quality_gate=args.no_quality_gate, on_event=progress,
                     on_notice=print_notice)
