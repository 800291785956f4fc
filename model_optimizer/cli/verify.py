"""`mopt verify [RECIPE]`: re-measure the validated revision and say whether it holds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from model_optimizer.archive import runs_dir
from model_optimizer.cli.common import (
    JsonOption,
    RunsDirOption,
    SetOption,
    handle_errors,
    print_json,
    progress_console,
)
from model_optimizer.cli.current import ForceOption, OptionalRecipeArg, load_chosen
from model_optimizer.cli.outcomes import print_notice, print_verification
from model_optimizer.cli.progress import RunProgress, SweepProgress, run_search
from model_optimizer.usecase.sweep import SWEEP_FILES
from model_optimizer.usecase.verify import needs_retune, retune, verify


@handle_errors
def verify_command(
    recipe: OptionalRecipeArg = None,
    url: Annotated[str | None, typer.Option(
        "--url", help="Measure the server running there (the deployment) instead of "
                      "launching one.", show_default=False)] = None,
    model: Annotated[str | None, typer.Option(help="--url: the model to request (default: "
                                              "the server's only one).")] = None,
    tokenizer: Annotated[Path | None, typer.Option(
        help="--url: tokenizer folder for exact prompt lengths (default: the recipe's "
             "model).")] = None,
    retune_it: Annotated[bool, typer.Option(
        "--retune", help="On a regression, run `mopt sweep RECIPE` (without --set) at "
                         "once; the exit code is then the sweep's.")] = False,
    overrides: SetOption = None,
    runs_dir_opt: RunsDirOption = None,
    force: ForceOption = False,
    as_json: JsonOption = False,
) -> None:
    """Re-measure RECIPE's validated revision and compare with the figures that validated it.

    The workload and budget are those of the validating run (`validated.run_id`, found under
    the runs dir); the figures are shown side by side with their 95% intervals. A figure
    regressed when it is worse than validated by more than the noise: both runs'
    intervals, the validating search's run-to-run noise, the 10% minimum effect and either
    run's drift (docs/production.md); `rollback --apply` judges by the same rule. The
    verdict is archived (kind verify): `mopt status` shows it, and `apply --strict` accepts
    a drifted recipe once a verification here holds.

    Without RECIPE, verifies the current recipe (see `mopt status`).

    A measured window the cross-check flags client-bound (the load client, not the engine,
    set its pace) is not judged: "not judged: client-bound (...)", exit 2, with how to
    measure the engine instead.

    On a GPU the SM clocks of both windows are compared: figures taken at different clocks
    (or with none recorded on one side) are still judged, and the verdict says so ("taken
    at different clocks: SM 1980 vs 1755 MHz"; --json: clocks).

    Exit codes: 0 the revision holds; 2 bad input (no validated block, a preflight
    refusal, a dead --url) or a client-bound window, not judged; 3 the server failed to
    start; 4 a figure regressed beyond the noise (named, with its interval); 5 the engine
    failed during the load; 130 interrupted.
    """
    loaded = load_chosen(recipe, overrides, "verify", as_json, runs_dir_opt)
    total = loaded.resolved["workload"].get("num_requests")
    with RunProgress(progress_console(as_json), total=total) as progress:
        result = verify(loaded, url=url, model=model, tokenizer=tokenizer,
                        runs_base=runs_dir(runs_dir_opt), force=force, on_event=progress,
                        on_notice=print_notice)
    if as_json:
        print_json(result.to_dict())
    else:
        print_verification(result)
    if retune_it and needs_retune(result):
        progress_console(as_json).print(f"--retune: mopt sweep {result.recipe_file}",
                                        highlight=False, markup=False, soft_wrap=True)
        sweeping = SweepProgress(progress_console(as_json))
        run_search(lambda: retune(result, runs_base=runs_dir(runs_dir_opt), force=force,
                                  on_event=sweeping, on_notice=print_notice),
                   sweeping, "sweep", SWEEP_FILES, as_json)
    raise typer.Exit(result.exit_code)
