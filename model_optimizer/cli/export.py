"""`mopt export [RECIPE] --to DIR --format vllm|compose|kubernetes|systemd`: deploy what
you validated, without mopt in the loop."""

from __future__ import annotations

import sys
from pathlib import Path
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
)
from model_optimizer.cli.current import OptionalRecipeArg, load_chosen
from model_optimizer.export import FORMATS, ExportOptions
from model_optimizer.export.formats import LOOPBACK
from model_optimizer.export.schedule import DEFAULT_SCHEDULE
from model_optimizer.fleet import is_fleet_file
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.usecase.export import ExportResult
from model_optimizer.usecase.export import export as run_export


@handle_errors
def export(
    recipe: OptionalRecipeArg = None,
    to: Annotated[Path, typer.Option("--to", help="Folder to write the files into "
                                     "(created; existing files of the same name replaced).",
                                     show_default=False)] = ...,  # type: ignore[assignment]
    formats: Annotated[list[str], typer.Option(
        "--format", "-f", help=f"One of {', '.join(FORMATS)}; repeat for several.",
        show_default=False)] = ...,  # type: ignore[assignment]
    port: Annotated[int | None, typer.Option(
        min=1, max=65535, help="Port of the deployment (default: the recipe's engine.port, "
        "else vLLM's 8000); of a fleet's router (default: router.port, else 4000).")] = None,
    router_host: Annotated[str, typer.Option(
        "--router-host", help="A fleet's router: the address it listens on (vllm, systemd) "
        "or is published on (compose).")] = LOOPBACK,
    python: Annotated[str, typer.Option(
        help="Interpreter that runs vLLM (vllm and systemd formats).")] = sys.executable,
    replicas: Annotated[int, typer.Option(min=1, help="kubernetes: Deployment replicas "
                                          "(see mopt capacity --target-rate).")] = 1,
    hpa_max: Annotated[int | None, typer.Option(
        "--hpa-max", min=1, help="kubernetes: add an HPA on vLLM's waiting-requests gauge, "
        "scaling up to this many replicas.")] = None,
    queue_target: Annotated[int, typer.Option(
        min=1, help="kubernetes HPA: waiting requests per server to aim for.")] = 4,
    tune_workers: Annotated[int, typer.Option(
        min=0, help="kubernetes: also an Indexed Job of this many `mopt tune` workers on "
        "one PostgreSQL study (URL from the Secret <name>-tune-db).")] = 0,
    tune_image: Annotated[str, typer.Option(
        help="Image of the tune workers and of the verification CronJob (vLLM's image "
        "with mopt installed).")] = "mopt-worker:latest",
    verify_schedule: Annotated[str, typer.Option(
        "--verify-schedule", help="kubernetes, systemd: when the deployment re-verifies "
        "itself (a CronJob / a timer running `mopt verify --url`), as cron (UTC), or "
        "@daily, @weekly...; `off` for none.")] = DEFAULT_SCHEDULE,
    force: Annotated[bool, typer.Option(
        "--force", help="Export even a recipe whose model.pins do not match the checkpoint "
        "on disk, that was never validated (or whose validation did not resolve), or whose "
        "hub model is at a branch no commit was found for; the archive records what was "
        "forced.")]
    = False,
    overrides: SetOption = None,
    runs_dir_opt: RunsDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Write the recipe's server as deployment files: vllm (a `vllm serve --config` file, an
    env file and how to start it exactly as mopt does), compose, kubernetes (Deployment,
    Service, optional HPA and tune workers' Job) or systemd; for kubernetes and systemd
    also a scheduled `mopt verify --url` of the deployment (a CronJob, a timer) whose
    archives stay on persistent storage. Refuses, unless --force, a recipe whose
    model.pins do not match the checkpoint on disk, one never validated (or whose
    validation did not resolve) and a hub model at a branch it cannot pin to a commit (from
    the local Hugging Face cache, else the hub); never writes a secret; records the export
    in an archive under the runs dir.

    A fleet file (kind: fleet) is exported whole: every instance's server with its share,
    the router (LiteLLM's proxy) with the configuration `mopt apply` generates, only the
    router reachable by clients, its master key never written (docs/fleet.md, "Export a
    fleet").

    Exit codes: 0 written; 2 bad input, a refusal above or a secret in the way.
    """
    options = ExportOptions(tuple(dict.fromkeys(formats)), port=port, force=force,
                            python=python, replicas=replicas, hpa_max=hpa_max,
                            queue_target=queue_target, tune_workers=tune_workers,
                            tune_image=tune_image, verify_schedule=verify_schedule,
                            router_host=router_host)
    chosen: Path | LoadedRecipe = (
        recipe if recipe is not None and is_fleet_file(recipe)  # a fleet file, exported whole
        else load_chosen(recipe, overrides, "export", as_json, runs_dir_opt))
    _print(run_export(chosen, to, options, overrides=overrides,
                      runs_base=runs_dir(runs_dir_opt)), as_json)


def _print(result: ExportResult, as_json: bool) -> None:
    if as_json:
        print_json(result.to_dict())
        return
    outcome = result.outcome
    for line in outcome.forced_over:
        console.print(f"--force: {line}", style="yellow", highlight=False, markup=False,
                      soft_wrap=True)
    console.print(f"exported {result.what} as "
                  f"{', '.join(outcome.formats)} to {outcome.folder}: "
                  f"{', '.join(sorted(outcome.files))}", highlight=False, markup=False,
                  soft_wrap=True)
    console.print(f"archive: {outcome.archive}", highlight=False, markup=False)
