"""`mopt bench --url`: load-test any running OpenAI-compatible server, measured like apply."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from model_optimizer.archive import runs_dir
from model_optimizer.cli.common import (
    JsonOption,
    RunsDirOption,
    SetOption,
    err_console,
    handle_errors,
    print_json,
)
from model_optimizer.cli.completion import complete_recipe
from model_optimizer.cli.outcomes import print_notice, print_outcome
from model_optimizer.cli.progress import RunProgress
from model_optimizer.usecase.bench import WorkloadFlags, bench_recipe
from model_optimizer.usecase.bench import bench as run_bench


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
    flags = WorkloadFlags(
        prompt_tokens=prompt_tokens, output_tokens=output_tokens, concurrency=concurrency,
        num_requests=num_requests, duration_s=duration_s, request_rate=request_rate,
        warmup=warmup, shared_prefix=shared_prefix, seed=seed, endpoint=endpoint,
        dataset=dataset, trace=trace, speed=speed, api_key_env=api_key_env,
        ignore_eos=ignore_eos)
    chosen = bench_recipe(recipe, flags, overrides)
    with RunProgress(err_console,  # progress on stderr: stdout holds the figures (--json)
                     total=chosen.loaded.resolved["workload"].get("num_requests")) as progress:
        outcome = run_bench(url, chosen, model=model, tokenizer=tokenizer,
                            runs_base=runs_dir(runs_dir_opt), on_event=progress,
                            on_notice=print_notice)
    if as_json:
        print_json(outcome.to_dict())
    else:
        print_outcome(outcome)
    raise typer.Exit(outcome.exit_code)
