"""`mopt capacity [RECIPE] [--url URL]`: the highest Poisson arrival rate within the SLOs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from model_optimizer.archive import runs_dir
from model_optimizer.archive.report import fmt
from model_optimizer.capacity import DEFAULT_HEADROOM, run_capacity, sizing_lines
from model_optimizer.cli.common import (
    JsonOption,
    RunsDirOption,
    SetOption,
    console,
    err_console,
    handle_errors,
    print_json,
)
from model_optimizer.cli.completion import complete_recipe
from model_optimizer.cli.current import ForceOption, prepare_launch
from model_optimizer.cli.outcomes import print_notice
from model_optimizer.cli.progress import RunProgress, bound_text
from model_optimizer.errors import UsageError
from model_optimizer.events import Event, LoadStarted, WindowDone, WindowStarted
from model_optimizer.recipe import LoadedRecipe, load_recipe, load_recipe_text
from model_optimizer.usecase.endpoint import endpoint_model

#: the recipe of ``mopt capacity --url`` without one: defaults, then --set
BARE_CAPACITY_RECIPE = "recipe_version: 1\nname: capacity\nmodel: {path: endpoint}\n"


class CapacityProgress(RunProgress):
    """Run progress plus one line per judged window."""

    def __call__(self, event: Event) -> None:
        if isinstance(event, WindowStarted):
            self._log(f"window {event.index}: {event.rate:.3g} req/s offered ..."
                      f"{bound_text(event.index, event.total, event.eta_s)}")
        elif isinstance(event, WindowDone):
            verdict = "passed" if event.passed else "FAILED"
            self._log(f"window {event.index}: {event.rate:.3g} req/s {verdict}: "
                      f"{event.reason}")
        elif not isinstance(event, LoadStarted):
            super().__call__(event)


def _capacity_recipe(recipe: Path | None, url: str | None, overrides: list[str] | None,
                     force: bool, runs_dir_opt: Path | None, as_json: bool) -> LoadedRecipe:
    """What capacity measures: with --url the given recipe or the bare one; otherwise the
    given or current recipe, preflighted like every launching command (exit 2 on a refusal
    before anything starts)."""
    if url is not None:
        return (load_recipe(recipe, overrides) if recipe is not None
                else load_recipe_text(BARE_CAPACITY_RECIPE, "<capacity flags>", overrides))
    return prepare_launch(recipe, overrides, "capacity", force, runs_dir_opt, as_json)


@handle_errors
def capacity(
    recipe: Annotated[Path | None, typer.Argument(
        help="Recipe YAML file (default: the current recipe, see `mopt status`). With --url "
        "and no RECIPE the workload, slo and capacity sections take their defaults and --set.",
        show_default=False, metavar="RECIPE",
        autocompletion=complete_recipe)] = None,
    url: Annotated[str | None, typer.Option(
        "--url", help="Measure this running OpenAI-compatible server instead of launching "
        "the recipe's.", show_default=False)] = None,
    model: Annotated[str | None, typer.Option(
        help="With --url: model name to request (default: the server's only model).")] = None,
    tokenizer: Annotated[Path | None, typer.Option(
        help="With --url: tokenizer folder (default: the recipe's model; without a recipe, "
        "the server's own /tokenize and /detokenize).")] = None,
    target_rate: Annotated[float | None, typer.Option(
        "--target-rate", help="Also size a fleet: servers needed "
        "for this many req/s, each kept at (1 - headroom) of the rate that passed.")] = None,
    headroom: Annotated[float, typer.Option(
        min=0.0, max=0.95, help="Fraction of each server's sustainable rate left free when "
        "sizing for --target-rate.")] = DEFAULT_HEADROOM,
    overrides: SetOption = None,
    force: ForceOption = False,
    runs_dir_opt: RunsDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Find the highest Poisson arrival rate at which the SLOs hold, on one live server.

    Rates grow by capacity.growth from capacity.start_rate until one fails, then bisect to
    capacity.resolution; each rate is a capacity.window_s window of open-loop arrivals. A
    rate passes when every SLO (per class too) holds and goodput is at least
    capacity.min_goodput_fraction of the offered rate. The answer names the limit that
    bound it (TTFT p99, KV capacity, preemptions, ...), the servers needed for
    --target-rate, and the cost per hour and per million output tokens when the recipe sets
    hardware.price_per_hour (mopt knows no prices). Exit 0 with a capacity, 4 when no
    rate passed, 2 bad input, 3 the server failed to start, 5 it died, 130 interrupted.
    """
    if target_rate is not None and target_rate <= 0:
        raise UsageError(f"--target-rate {target_rate:g}: give a rate above 0 req/s")
    loaded = _capacity_recipe(recipe, url, overrides, force, runs_dir_opt, as_json)
    model_name = tokenizer_dir = None
    if url is not None:
        url = url.rstrip("/")
        model_name, tokenizer_dir = endpoint_model(url, loaded, model, tokenizer,
                                                   recipe_given=recipe is not None,
                                                   on_notice=print_notice)
    with CapacityProgress(err_console) as progress:
        outcome = run_capacity(loaded, runs_dir(runs_dir_opt), url=url, model_name=model_name,
                               tokenizer_dir=tokenizer_dir, on_event=progress,
                               target_rate=target_rate, headroom=headroom)
    if as_json:
        print_json(outcome.to_dict())
    else:
        result = outcome.result
        found = result.get("capacity_rps")
        console.print(f"capacity: {fmt(found, 3) if found is not None else 'none'} req/s "
                      f"(first failing rate {fmt(result.get('first_failing_rps'), 3)}); "
                      f"{result.get('windows')} windows; {result.get('stop_reason')}",
                      highlight=False)
        for line in sizing_lines(result.get("sizing")):
            console.print(line.removeprefix("- ").replace("**", ""), highlight=False,
                          markup=False, soft_wrap=True)
        console.print(f"archive: {outcome.archive}", highlight=False)
    raise typer.Exit(outcome.exit_code)
