"""`mopt bench --url`: load-test any running OpenAI-compatible server, measured like apply."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from model_optimizer.archive import runs_dir
from model_optimizer.cli.apply import print_outcome
from model_optimizer.cli.common import (
    JsonOption,
    RunsDirOption,
    SetOption,
    err_console,
    handle_errors,
    print_json,
)
from model_optimizer.cli.completion import complete_recipe
from model_optimizer.cli.endpoint import endpoint_model
from model_optimizer.cli.progress import RunProgress
from model_optimizer.recipe import load_recipe, load_recipe_text
from model_optimizer.runner import bench_endpoint
from model_optimizer.signals import terminate_as_interrupt

_BARE_RECIPE = "recipe_version: 1\nname: bench\nmodel: {path: endpoint}\n"
_FLAG_KEYS = {"prompt_tokens": "prompt_tokens", "output_tokens": "output_tokens",
              "concurrency": "concurrency", "num_requests": "num_requests",
              "duration_s": "duration_s", "request_rate": "request_rate",
              "warmup": "warmup_requests", "shared_prefix": "shared_prefix_tokens",
              "seed": "seed", "endpoint": "endpoint", "dataset": "dataset.path",
              "api_key_env": "api_key_env", "ignore_eos": "ignore_eos"}


def _flag_text(value: object) -> str:
    """A flag's value as ``--set`` text (booleans as YAML, paths absolute)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Path):
        return str(value.expanduser().resolve())
    return str(value)


@handle_errors
def bench(
    url: Annotated[str, typer.Option("--url", help="Base URL of the server, e.g. "
                                     "http://127.0.0.1:8000", show_default=False)],
    recipe: Annotated[Path | None, typer.Option("--recipe", help="Take the workload and SLOs "
                                                "from this recipe.",
                                                autocompletion=complete_recipe)] = None,
    model: Annotated[str | None, typer.Option(help="Model name to request (default: the "
                                              "server's only model).")] = None,
    tokenizer: Annotated[Path | None, typer.Option(
        help="Tokenizer folder for exact prompt lengths (default: the recipe's model; without "
             "--recipe, the server's own /tokenize and /detokenize endpoints).")] = None,
    prompt_tokens: Annotated[int | None, typer.Option(help="Prompt length in tokens.")] = None,
    output_tokens: Annotated[int | None, typer.Option(help="Output tokens per request.")] = None,
    concurrency: Annotated[int | None, typer.Option(help="Requests in flight.")] = None,
    num_requests: Annotated[int | None, typer.Option(help="Measured requests.")] = None,
    duration_s: Annotated[float | None, typer.Option("--duration", help="Measured seconds.")]
    = None,
    request_rate: Annotated[str | None, typer.Option(help="'inf' or Poisson requests/s.")]
    = None,
    warmup: Annotated[int | None, typer.Option(help="Warm-up requests (not measured).")] = None,
    shared_prefix: Annotated[int | None, typer.Option(help="Shared prefix tokens.")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed for prompts and arrivals.")] = None,
    endpoint: Annotated[str | None, typer.Option(help="completions or chat.")] = None,
    dataset: Annotated[Path | None, typer.Option(
        help="Prompt file (.jsonl, .csv, ShareGPT .json) instead of synthetic prompts.")]
    = None,
    api_key_env: Annotated[str | None, typer.Option(
        help="Environment variable holding the server's API key (sent as a Bearer token; "
             "only the name is archived).")] = None,
    ignore_eos: Annotated[bool | None, typer.Option(
        "--ignore-eos/--no-ignore-eos", help="Send ignore_eos (default) or not, for servers "
        "that reject it; output lengths then vary.", show_default=False)] = None,
    overrides: SetOption = None,
    runs_dir_opt: RunsDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run mopt's load generator against a running server at --url and archive the figures.

    Workload from --recipe's workload section and/or the flags (flags win). Exit 0 when the
    SLOs are met, 4 when not, 2 for bad input.
    """
    url = url.rstrip("/")
    given = locals()
    flag_sets = [f"workload.{key}={_flag_text(given[flag])}"
                 for flag, key in _FLAG_KEYS.items() if given[flag] is not None]
    sets = flag_sets + list(overrides or [])
    loaded = (load_recipe(recipe, sets) if recipe is not None
              else load_recipe_text(_BARE_RECIPE, "<bench flags>", sets))
    model_name, tokenizer_dir = endpoint_model(url, loaded, model, tokenizer,
                                               recipe_given=recipe is not None)
    terminate_as_interrupt()
    progress_console = err_console if as_json else None
    with RunProgress(progress_console or err_console,
                     total=loaded.resolved["workload"].get("num_requests")) as progress:
        outcome = bench_endpoint(url, loaded, model_name, tokenizer_dir, runs_dir(runs_dir_opt),
                                 on_event=progress, archive_extra={"tokenizer": tokenizer_dir})
    if as_json:
        print_json(outcome.to_dict())
    else:
        print_outcome(outcome)
    raise typer.Exit(outcome.exit_code)
