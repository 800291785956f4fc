"""`mopt eval`: evaluate a deployment's answers (and compare them with a baseline's)."""

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
from model_optimizer.cli.outcomes import print_eval, print_notice
from model_optimizer.cli.progress import EvalProgress
from model_optimizer.usecase.eval import evaluate


@handle_errors
def eval_command(
    recipe: OptionalRecipeArg = None,
    baseline: Annotated[str | None, typer.Option(
        "--baseline", help="Compare with this baseline: a recipe file (launched and evaluated "
                           "first) or an eval archive (runs/<id>, id or prefix). Default: the "
                           "recipe's quality.baseline.", show_default=False)] = None,
    url: Annotated[str | None, typer.Option(
        "--url", help="Evaluate this running OpenAI-compatible server instead of launching "
                      "the recipe.", show_default=False)] = None,
    model: Annotated[str | None, typer.Option(
        help="With --url: the model name to request (default: the recipe's served name).",
        show_default=False)] = None,
    eval_set: Annotated[Path | None, typer.Option(
        "--eval-set", help="JSONL eval set (default: quality.eval_set).",
        show_default=False)] = None,
    lm_eval_task: Annotated[list[str] | None, typer.Option(
        "--lm-eval-task", help="lm-eval task to run (repeatable; default: "
                               "quality.lm_eval.tasks).", show_default=False)] = None,
    repeats: Annotated[int | None, typer.Option(
        min=1, help="Generations per item, seeds seed..seed+repeats-1 (default: "
                    "quality.repeats).", show_default=False)] = None,
    overrides: SetOption = None,
    runs_dir_opt: RunsDirOption = None,
    force: ForceOption = False,
    as_json: JsonOption = False,
) -> None:
    """Evaluate RECIPE's answers on its eval set (and lm-eval tasks) with fixed sampling.

    Launches vLLM from RECIPE (or uses --url), generates with the recorded seed, temperature,
    top_p and max_tokens, and archives texts, token ids and top-k logprobs as an `eval` run.
    With a baseline it reports exact match, first diverging token, top-1 agreement and KL
    divergence, task accuracy against the baseline's, and the quality gate's verdict
    (quality.thresholds). Sampling settings and thresholds come from the recipe's quality
    section (--set quality.temperature=0.7 changes one).

    Exit codes: 0 evaluated (and the gate passed, when there is one); 2 bad input; 3 the
    server failed to start; 4 the quality gate failed; 5 the eval failed (requests or
    lm-eval); 130 interrupted. The server is always stopped before mopt exits.
    """
    loaded = load_chosen(recipe, overrides, "eval", as_json, runs_dir_opt)
    with EvalProgress(progress_console(as_json), label="eval: ") as progress:
        result = evaluate(loaded, baseline=baseline, url=url, model=model, eval_set=eval_set,
                          lm_eval_tasks=lm_eval_task, repeats=repeats,
                          runs_base=runs_dir(runs_dir_opt), force=force, on_event=progress,
                          on_notice=print_notice)
    if as_json:
        print_json(result.to_dict())
    else:
        print_eval(result.outcome)
    raise typer.Exit(result.exit_code)
