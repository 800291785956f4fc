"""`mopt workload compare TRACE RECIPE`: the trace against the recipe's workload, and whether
to re-validate; `mopt workload import LOG`: a gateway's log as a trace (``load.trace_import``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from model_optimizer.cli.common import JsonOption, console, handle_errors, print_json
from model_optimizer.cli.completion import complete_recipe
from model_optimizer.errors import EXIT_SLO_FAILED, UsageError
from model_optimizer.load.compare import compare, trace_profile, workload_profile
from model_optimizer.load.dataset import read_dataset
from model_optimizer.load.replay import trace_path
from model_optimizer.load.trace import read_trace
from model_optimizer.load.trace_import import import_litellm
from model_optimizer.recipe import RecipeSpec, load_recipe
from model_optimizer.recipe.render import model_location

workload_app = typer.Typer(help="Real traffic against a recipe's workload.",
                           no_args_is_help=True)
WORDS_TO_TOKENS = 1.3  # a text's tokens estimated from its words, without a tokenizer

_ROWS = (("requests", "requests", "{:g}"), ("prompt p50 (tok)", "prompt_p50", "{:,.0f}"),
         ("prompt p90 (tok)", "prompt_p90", "{:,.0f}"), ("output p50 (tok)", "output_p50",
                                                         "{:,.0f}"),
         ("output p90 (tok)", "output_p90", "{:,.0f}"), ("rate (req/s)", "rate_qps", "{:.3g}"),
         ("burstiness (CV)", "burstiness", "{:.2f}"), ("shared prefix", "prefix_share", "{:.0%}"))


def _counter(tokenizer: Path | None, recipe: Any) -> tuple[Any, str]:
    """A text -> tokens function and how it counts: ``--tokenizer``, else the recipe's
    model folder, else words x WORDS_TO_TOKENS (said so)."""
    candidates = [tokenizer] if tokenizer is not None else []
    if tokenizer is None:
        spec = RecipeSpec.of(recipe.resolved)
        candidates.append(Path(spec.model.tokenizer or model_location(spec, recipe.base_dir)))
    for folder in candidates:
        if folder is not None and (Path(folder) / "tokenizer_config.json").is_file():
            from model_optimizer.load.prompts import load_tokenizer
            return _token_counter(load_tokenizer(str(folder))), f"tokens of {folder}"
    if tokenizer is not None:
        raise UsageError(f"--tokenizer {tokenizer}: no tokenizer_config.json there; pass the "
                         "model's folder")
    return (lambda text: round(len(text.split()) * WORDS_TO_TOKENS),
            f"text lengths estimated as words x {WORDS_TO_TOKENS} (pass --tokenizer DIR)")


def _token_counter(tokenizer: Any) -> Any:
    return lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])


@workload_app.command("compare")
@handle_errors
def compare_command(
    trace: Annotated[Path, typer.Argument(help="The trace (JSONL, docs/workloads.md).")],
    recipe: Annotated[Path, typer.Argument(help="The recipe whose workload to compare.",
                                           autocompletion=complete_recipe)],
    tokenizer: Annotated[Path | None, typer.Option(
        help="Tokenizer folder for text prompts (default: the recipe's model folder).")]
    = None,
    as_json: JsonOption = False,
) -> None:
    """How TRACE differs from RECIPE's workload: lengths, rate, burstiness, shared prefixes.

    Exit 0 when the recipe's validation still stands for this traffic, 4 when the difference
    is large enough to re-validate (the rule: docs/workloads.md, "Traces"), 2 for bad input.
    """
    loaded = load_recipe(recipe)
    count, counted = _counter(tokenizer, loaded)
    workload = loaded.resolved["workload"]

    def dataset_lengths() -> tuple[list[int], list[int]]:
        path = Path(workload["dataset"]["path"])
        path = path if path.is_absolute() else loaded.base_dir / path
        entries = read_dataset(path, workload["dataset"].get("format"))
        prompts = [count(e.prompt or " ".join(m["content"] for m in e.messages or ()))
                   for e in entries]
        outputs = [e.output_tokens or (count(e.output_text) if e.output_text else None)
                   or workload["output_tokens"] for e in entries]
        return prompts, outputs

    result = compare(trace_profile(read_trace(trace), count),
                     workload_profile(workload, lambda _: read_trace(
                         trace_path(workload, loaded.base_dir)), count, dataset_lengths))
    result["counted"] = counted
    if as_json:
        print_json(result)
    else:
        _print(result, trace, recipe)
    raise typer.Exit(EXIT_SLO_FAILED if result["revalidate"] else 0)


def _print(result: dict, trace: Path, recipe: Path) -> None:
    table = Table(show_edge=False)
    for column in ("", f"trace {trace.name}", f"recipe {recipe.name}"):
        table.add_column(column, justify="left" if not column else "right")
    for label, key, form in _ROWS:
        cells = [result[side][key] for side in ("trace", "recipe")]
        table.add_row(label, *("-" if v is None else form.format(v) for v in cells))
    console.print(table)
    for note in [*result["notes"], result["counted"]]:
        console.print(f"note: {note}", highlight=False, markup=False)
    if result["revalidate"]:
        console.print("[red]re-validate:[/] the traffic differs from the validated workload: "
                      + "; ".join(result["reasons"]), highlight=False)
    else:
        console.print("[green]holds:[/] within the rule on every figure", highlight=False)


@workload_app.command("import")
@handle_errors
def import_command(
    log: Annotated[Path, typer.Argument(help="LiteLLM standard logging payloads, one JSON "
                                        "object per line.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The trace to write (JSONL).")],
    session_key: Annotated[str, typer.Option(
        help="Key of the payload's metadata (or requester_metadata) holding a session id; "
             "without one, a chat's first user message groups its turns.")] = "session_id",
) -> None:
    """Convert LITELLM log lines (StandardLoggingPayload) into a trace of the mopt format."""
    written, skipped = import_litellm(log, out, session_key)
    console.print(f"wrote {written} requests to {out}" + (f" ({skipped} failed calls "
                                                           "skipped)" if skipped else ""),
                  highlight=False, markup=False)
