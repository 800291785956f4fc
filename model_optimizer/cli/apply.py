"""`mopt apply`: launch vLLM from a recipe, load-test it, archive the run."""

from __future__ import annotations

from typing import Annotated

import typer

from model_optimizer.archive import runs_dir
from model_optimizer.cli.common import (
    JsonOption,
    RunsDirOption,
    SetOption,
    console,
    handle_errors,
    print_json,
    progress_console,
)
from model_optimizer.cli.current import ForceOption, OptionalRecipeArg, load_chosen
from model_optimizer.cli.fleet_apply import apply_fleet_command
from model_optimizer.cli.outcomes import print_eval, print_notice, print_outcome
from model_optimizer.cli.progress import RunProgress
from model_optimizer.fleet import is_fleet_file
from model_optimizer.recipe import Variation
from model_optimizer.recipe.overrides import parse_value
from model_optimizer.usecase.apply import apply as run_apply


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
        apply_fleet_command(recipe, overrides, runs_dir_opt, as_json)
        return
    if speed is not None:
        overrides = [*(overrides or []), Variation(
            "workload.trace_speed", parse_value("workload.trace_speed", speed),
            "mopt apply --speed")]
    loaded = load_chosen(recipe, overrides, "apply", as_json, runs_dir_opt)
    total = loaded.resolved["workload"].get("num_requests")
    with RunProgress(progress_console(as_json), total=total) as progress:
        result = run_apply(loaded, runs_base=runs_dir(runs_dir_opt), strict=strict,
                           force=force, on_event=progress, on_notice=print_notice)
    if as_json:
        print_json(result.to_dict())
    else:
        print_outcome(result.outcome)
        if result.quality is not None:
            console.print("quality:", highlight=False)
            print_eval(result.quality)
    raise typer.Exit(result.exit_code)
