"""`mopt capacity RECIPE`: the highest Poisson arrival rate within the SLOs, on one server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from model_optimizer.archive import runs_dir
from model_optimizer.archive.report import fmt
from model_optimizer.capacity import run_capacity
from model_optimizer.cli.bench import served_models
from model_optimizer.cli.common import (
    JsonOption,
    RecipeArg,
    RunsDirOption,
    SetOption,
    console,
    err_console,
    handle_errors,
    print_json,
)
from model_optimizer.cli.progress import RunProgress
from model_optimizer.errors import UsageError
from model_optimizer.load.workload import api_headers
from model_optimizer.recipe import load_recipe
from model_optimizer.recipe.render import model_location


class CapacityProgress(RunProgress):
    """Run progress plus one line per judged window."""

    def __call__(self, phase: str, data: dict) -> None:
        if phase == "window":
            self._log(f"window {data['index']}: {data['rate']:.3g} req/s offered ...")
        elif phase == "window_done":
            verdict = "passed" if data["passed"] else "FAILED"
            self._log(f"window {data['index']}: {data['rate']:.3g} req/s {verdict}: "
                      f"{data['reason']}")
        elif phase != "load":
            super().__call__(phase, data)


@handle_errors
def capacity(
    recipe: RecipeArg,
    url: Annotated[str | None, typer.Option(
        "--url", help="Measure this running OpenAI-compatible server instead of launching "
        "the recipe's.", show_default=False)] = None,
    model: Annotated[str | None, typer.Option(
        help="With --url: model name to request (default: the server's only model).")] = None,
    tokenizer: Annotated[Path | None, typer.Option(
        help="With --url: tokenizer folder (default: the recipe's model).")] = None,
    overrides: SetOption = None,
    runs_dir_opt: RunsDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Find the highest Poisson arrival rate at which RECIPE's SLOs hold, on one live server.

    Rates grow by capacity.growth from capacity.start_rate until one fails, then bisect to
    capacity.resolution; each rate is a capacity.window_s window of open-loop arrivals. A
    rate passes when every SLO (per class too) holds and goodput is at least
    capacity.min_goodput_fraction of the offered rate. Exit 0 with a capacity, 4 when no
    rate passed, 2 bad input, 3 the server failed to start, 5 it died, 130 interrupted.
    """
    loaded = load_recipe(recipe, overrides)
    model_name = tokenizer_dir = None
    if url is not None:
        url = url.rstrip("/")
        names = served_models(url, api_headers(loaded.resolved["workload"]))
        model_name = model or (names[0] if len(names) == 1 else None)
        if model_name is None:
            raise UsageError(f"{url} serves {len(names)} models ({', '.join(names)}); "
                             "choose one with --model")
        tokenizer_dir = str(tokenizer) if tokenizer else (
            loaded.resolved["model"].get("tokenizer")
            or model_location(loaded.resolved, loaded.base_dir))
    with CapacityProgress(err_console) as progress:
        outcome = run_capacity(loaded, runs_dir(runs_dir_opt), url=url, model_name=model_name,
                               tokenizer_dir=tokenizer_dir, on_event=progress)
    if as_json:
        print_json(outcome.to_dict())
    else:
        result = outcome.result
        found = result.get("capacity_rps")
        console.print(f"capacity: {fmt(found, 3) if found is not None else 'none'} req/s "
                      f"(first failing rate {fmt(result.get('first_failing_rps'), 3)}); "
                      f"{result.get('windows')} windows; {result.get('stop_reason')}",
                      highlight=False)
        console.print(f"archive: {outcome.archive}", highlight=False)
    raise typer.Exit(outcome.exit_code)
