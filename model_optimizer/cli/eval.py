"""`mopt eval`: evaluate a deployment's answers (and compare them with a baseline's)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from model_optimizer.cli.common import (
    JsonOption,
    RunsDirOption,
    SetOption,
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
from model_optimizer.cli.outcomes import print_eval
from model_optimizer.cli.progress import EvalProgress
from model_optimizer.errors import EXIT_OK, EXIT_RUN_FAILED, EXIT_SLO_FAILED, EXIT_START_FAILED
from model_optimizer.quality import evaluate, quality_of
from model_optimizer.quality.config import LmEvalConfig
from model_optimizer.quality.evaluate import EvalOutcome
from model_optimizer.signals import terminate_as_interrupt


def _exit_code(outcome: EvalOutcome) -> int:
    result = outcome.result
    if not result.ok:
        return EXIT_START_FAILED if (result.archive / "failure.json").is_file() \
            else EXIT_RUN_FAILED
    if outcome.gate is not None and not outcome.gate.passed:
        return EXIT_SLO_FAILED
    return EXIT_OK


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
    config = quality_of(loaded)
    if eval_set is not None:
        config = config.with_overrides(eval_set=str(eval_set.resolve()))
    if lm_eval_task:
        config = replace(config, lm_eval=replace(config.lm_eval or LmEvalConfig(),
                                                 tasks=tuple(lm_eval_task)))
    config = config.with_overrides(repeats=repeats)
    if url is None:
        check_before_launch(loaded, force, err_console)
    terminate_as_interrupt()
    with EvalProgress(progress_console(as_json), label="eval: ") as progress:
        outcome = evaluate(loaded, config=config, baseline=baseline, url=url, model=model,
                           runs_base=runs_dir_opt, on_event=progress)
    if as_json:
        print_json(outcome.to_dict())
    else:
        print_eval(outcome)
    raise typer.Exit(_exit_code(outcome))
