"""`mopt bench --url`: load-test any running OpenAI-compatible server, measured like apply."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
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
from model_optimizer.load import parse_request_rate
from model_optimizer.recipe import LoadedRecipe, Variation, load_recipe, load_recipe_text
from model_optimizer.recipe.overrides import parse_value
from model_optimizer.runner import bench_endpoint
from model_optimizer.signals import terminate_as_interrupt

_BARE_RECIPE = "recipe_version: 1\nname: bench\nmodel: {path: endpoint}\n"


def _flag_value(key: str, value: object) -> object:
    """A flag's value as the recipe value it sets: paths absolute, text typed as the key's
    schema types it (``--request-rate 2.5`` is 2.5, ``inf`` stays ``inf``)."""
    if isinstance(value, Path):
        return str(value.expanduser().resolve())
    if isinstance(value, str):
        return parse_value(key, value)
    return value


@dataclass(frozen=True)
class WorkloadFlags:
    """``mopt bench``'s workload flags, None when not given; each sets ``workload.<name>``,
    or the key its field's metadata names (``flag``: its spelling when not ``--<name>``)."""

    prompt_tokens: int | None = None
    output_tokens: int | None = None
    concurrency: int | None = None
    num_requests: int | None = None
    duration_s: float | None = field(default=None, metadata={"flag": "--duration"})
    request_rate: str | None = None
    warmup: int | None = field(default=None, metadata={"key": "warmup_requests"})
    shared_prefix: int | None = field(default=None, metadata={"key": "shared_prefix_tokens"})
    seed: int | None = None
    endpoint: str | None = None
    dataset: Path | None = field(default=None, metadata={"key": "dataset.path"})
    trace: Path | None = None
    speed: str | None = field(default=None, metadata={"key": "trace_speed"})
    api_key_env: str | None = None
    ignore_eos: bool | None = None

    def variations(self) -> list[Variation]:
        """The typed workload values of the flags given, in field order, each recorded as
        from its flag."""
        out = []
        for item in fields(self):
            value = getattr(self, item.name)
            if value is None:
                continue
            key = "workload." + item.metadata.get("key", item.name)
            flag = item.metadata.get("flag", "--" + item.name.replace("_", "-"))
            out.append(Variation(key, _flag_value(key, value), f"mopt bench {flag}"))
        return out


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
    trace: Annotated[Path | None, typer.Option(
        help="Request trace (JSONL with timestamps, see docs/workloads.md) replayed at its "
             "own arrival times.")] = None,
    speed: Annotated[str | None, typer.Option(
        help="Replay the trace this much faster, e.g. 2x (0.5x: slower).")] = None,
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
    flags = WorkloadFlags(
        prompt_tokens=prompt_tokens, output_tokens=output_tokens, concurrency=concurrency,
        num_requests=num_requests, duration_s=duration_s, request_rate=request_rate,
        warmup=warmup, shared_prefix=shared_prefix, seed=seed, endpoint=endpoint,
        dataset=dataset, trace=trace, speed=speed, api_key_env=api_key_env,
        ignore_eos=ignore_eos)
    loaded = _load(recipe, flags, overrides)
    model_name, tokenizer_dir = endpoint_model(url, loaded, model, tokenizer,
                                               recipe_given=recipe is not None)
    _say_open_loop(loaded.resolved["workload"])
    terminate_as_interrupt()
    with RunProgress(err_console,  # progress on stderr: stdout holds the figures (--json)
                     total=loaded.resolved["workload"].get("num_requests")) as progress:
        outcome = bench_endpoint(url, loaded, model_name, tokenizer_dir, runs_dir(runs_dir_opt),
                                 on_event=progress, archive_extra={"tokenizer": tokenizer_dir})
    if as_json:
        print_json(outcome.to_dict())
    else:
        print_outcome(outcome)
    raise typer.Exit(outcome.exit_code)


def _say_open_loop(workload: dict) -> None:
    """An open loop without a concurrency runs uncapped (runner.effective_workload): say so."""
    rate = parse_request_rate(workload.get("request_rate", "inf"))
    if workload.get("trace"):
        err_console.print(f"replaying {workload['trace']} at its own arrival times "
                          f"(speed {workload.get('trace_speed') or 1})", highlight=False,
                          markup=False)
    elif rate is not None and workload.get("concurrency") is None:
        err_console.print(f"open loop: {rate:g} requests/s arriving, no cap on requests in "
                          "flight (--concurrency N sets one)", highlight=False, markup=False)


def _load(recipe: Path | None, flags: WorkloadFlags, overrides: list[str] | None
          ) -> LoadedRecipe:
    """--recipe (or a bare recipe) with the workload flags, then --set, applied."""
    sets = [*flags.variations(), *(overrides or [])]
    return (load_recipe(recipe, sets) if recipe is not None
            else load_recipe_text(_BARE_RECIPE, "<bench flags>", sets))
