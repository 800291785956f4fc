"""`mopt plan`: memory and bandwidth arithmetic for a recipe, before any GPU time is spent."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from model_optimizer.cli.common import (
    JsonOption,
    ModelConfigOption,
    SetOption,
    console,
    handle_errors,
    print_json,
)
from model_optimizer.cli.current import OptionalRecipeArg, load_chosen
from model_optimizer.cli.fleet_plan import plan_fleet_command
from model_optimizer.errors import UsageError
from model_optimizer.fleet import is_fleet_file
from model_optimizer.plan import PlanReport, estimate, load_model_config
from model_optimizer.plan.checkpoint_files import read_checkpoint
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.recipe.render import model_location

GIB = 1024**3


def find_model_config(loaded: LoadedRecipe, explicit: Path | None) -> Path:
    """``--model-config`` if given, else the model folder's config.json; clear error if neither."""
    if explicit is not None:
        return explicit
    location = Path(model_location(loaded.resolved, loaded.base_dir))
    candidate = location / "config.json"
    if candidate.is_file():
        return candidate
    raise UsageError(
        f"{loaded.path}: model.path '{loaded.resolved['model']['path']}' has no config.json on "
        "this machine (a hub id or a missing folder); pass the model's config with "
        "--model-config FILE, e.g. --model-config examples/llama-2-7b-config.json for a "
        "Llama-2-7B recipe.")


def _gib(value: float) -> str:
    if abs(value) < GIB:
        return f"{value / 1024**2:,.1f} MiB"
    return f"{value / GIB:,.2f} GiB"


def plan_table(report: PlanReport) -> Table:
    """The plan as a two-column table."""
    table = Table(show_header=False, show_edge=False, pad_edge=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    rows = [
        ("accelerator", f"{report.accelerator}: {report.memory_gib:,.1f} GiB, "
                        f"{report.bandwidth_gbps:,.0f} GB/s, TP {report.tensor_parallel_size}"),
        ("parameters", f"{report.param_count:,} ({report.param_source})"),
        *([("mixture of experts", f"{report.moe}; {report.expert_param_count:,} in routed "
                                  "experts")] if report.moe else []),
        ("layers", report.attention),
        ("weights", f"{_gib(report.weight_bytes)} ({report.quantization}, "
                    f"{report.linear_bits_effective:.2f} bits/linear weight); "
                    f"{_gib(report.weight_bytes_per_device)} per device"),
        ("KV cache per token", f"{report.kv_bytes_per_token:,} bytes ({report.kv_cache_dtype})"),
        ("KV budget", f"{_gib(report.kv_budget_bytes)} per device"
                      + (f" at gpu_memory_utilization {report.gpu_memory_utilization}"
                         if report.gpu_memory_utilization is not None else "")),
        ("KV tokens", f"{report.kv_tokens:,} ({report.kv_blocks:,} blocks of "
                      f"{report.block_size})"),
        ("max_model_len", f"{report.max_model_len} "
                          f"({'fits' if report.fits_max_model_len else 'does NOT fit'})"),
        ("sequences w/o preemption", f"{report.max_seqs_no_preemption:,} at {report.seq_len} "
                                     f"tokens each (recipe max_num_seqs "
                                     f"{report.recipe_max_num_seqs}"
                                     + (", vLLM default" if report.recipe_max_num_seqs_is_default
                                        else "") + ")"),
    ]
    rows += [(f"TPOT floor, {floor.label}",
              f"{floor.tpot_floor_ms:.2f} ms/token at batch {floor.batch} "
              f"(<= {floor.tokens_per_s_ceiling:,.0f} tok/s)") for floor in report.decode_floors]
    for what, value in rows:
        table.add_row(what, value)
    return table


@handle_errors
def plan(
    recipe: OptionalRecipeArg = None,
    model_config: ModelConfigOption = None,
    overrides: SetOption = None,
    as_json: JsonOption = False,
) -> None:
    """Estimate memory, KV capacity and the decode bandwidth floor. No GPU, no vLLM needed.

    Exits 0 when the recipe fits, 1 when the arithmetic says vLLM cannot start with it.
    A fleet file (kind: fleet) is planned instance by instance, with the verdict for the
    shared accelerator (docs/fleet.md).
    """
    if recipe is not None and is_fleet_file(recipe):
        plan_fleet_command(recipe, model_config, overrides, as_json)
        return
    loaded = load_chosen(recipe, overrides, "plan", as_json)
    config_path = find_model_config(loaded, model_config)
    folder = config_path.parent if config_path.name == "config.json" else None
    report = estimate(loaded.resolved, load_model_config(config_path),
                      read_checkpoint(folder) if folder else None)
    if as_json:
        print_json({**report.to_dict(), "model_config": str(config_path)})
    else:
        console.rule(f"plan: {loaded.name} (model config {config_path})")
        console.print(plan_table(report))
        for label, items, style in (("problem", report.problems, "bold red"),
                                    ("warning", report.warnings, "yellow"),
                                    ("note", report.notes, "dim")):
            for item in items:
                console.print(f"[{style}]{label}:[/] {escape(str(item))}", highlight=False)
        style = "green" if report.fits and not report.warnings else (
            "yellow" if report.fits else "bold red")
        console.print(f"verdict: [{style}]{report.verdict}[/]")
    if not report.fits:
        raise typer.Exit(1)
