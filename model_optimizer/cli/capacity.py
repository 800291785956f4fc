"""`mopt capacity [RECIPE] [--url URL]`: the highest Poisson arrival rate within the SLOs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from model_optimizer.archive import runs_dir
from model_optimizer.archive.report import fmt
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
from model_optimizer.cli.current import ForceOption, load_chosen
from model_optimizer.cli.outcomes import print_notice
from model_optimizer.cli.progress import RunProgress, bound_text
from model_optimizer.events import Event, LoadStarted, WindowDone, WindowStarted
from model_optimizer.search.capacity import DEFAULT_HEADROOM, sizing_lines
from model_optimizer.usecase.capacity import capacity as run_capacity
from model_optimizer.usecase.capacity import check_target_rate


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
    check_target_rate(target_rate)
    chosen = recipe if url is not None else load_chosen(recipe, overrides, "capacity",
                                                         as_json, runs_dir_opt)
    with CapacityProgress(err_console) as progress:
        outcome = run_capacity(chosen, overrides=overrides, url=url, model=model,
                               tokenizer=tokenizer, target_rate=target_rate,
                               headroom=headroom, runs_base=runs_dir(runs_dir_opt),
                               force=force, on_event=progress, on_notice=print_notice)
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
