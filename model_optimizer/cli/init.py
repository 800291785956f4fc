"""`mopt init MODEL_DIR`: write a starting recipe for a model folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from model_optimizer.cli.common import JsonOption, console, err_console, handle_errors, print_json
from model_optimizer.usecase.init import init as write_recipe


@handle_errors
def init(
    model_dir: Annotated[Path, typer.Argument(help="Model folder with config.json.",
                                              show_default=False, metavar="MODEL_DIR")],
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Recipe file to write "
                      "(default: recipes/<folder name>.yaml).")] = None,
    name: Annotated[str | None, typer.Option(help="Recipe name (default: the folder's).")] = None,
    accelerator: Annotated[str | None, typer.Option(help="Hardware to plan for (A10, L4, "
                           "L40S, A100-40GB, A100-80GB, H100, H200, B200, MI300X, cpu; any "
                           "case); default: the one this machine has (NVML, else cpu).")] = None,
    memory_gib: Annotated[float | None, typer.Option(help="Memory per device (RAM on cpu) "
                          "instead of the table's/the machine's.")] = None,
    count: Annotated[int | None, typer.Option(help="Number of devices.")] = None,
    prompts: Annotated[Path | None, typer.Option(help="Your prompt file (JSONL: prompt, "
                       "messages or text per line): the prompt length is its median in the "
                       "model's tokenizer; its first prompts (up to 32, at most half) become "
                       "the quality gate's eval set, the rest the calibration set.")] = None,
    prompt_tokens: Annotated[int, typer.Option(min=1, help="Prompt length without "
                             "--prompts.")] = 512,
    output_tokens: Annotated[int, typer.Option(min=1, help="Tokens generated per "
                             "request.")] = 128,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Write a commented starting recipe for MODEL_DIR: the planner's max_model_len and
    max_num_seqs for the hardware, a workload, and an explanation of every value.

    The recipe validates; `mopt plan` shows the arithmetic, `mopt optimize` measures it.
    Exit 0, or 2 on a bad folder, flag or an existing file without --force.
    """
    result = write_recipe(model_dir, output=output, name=name, accelerator=accelerator,
                          memory_gib=memory_gib, count=count, prompts=prompts,
                          prompt_tokens=prompt_tokens, output_tokens=output_tokens, force=force)
    for warning in result.warnings:
        err_console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False,
                          soft_wrap=True)
    if as_json:
        print_json(result.to_dict())
        return
    console.print(f"wrote {result.recipe} ({result.name}, {result.hardware.description}); "
                  f"plan: {result.plan}", highlight=False)
    for problem in result.choices["problems"]:
        console.print(f"[bold red]problem:[/] {problem}", highlight=False)
    console.print(f"next: mopt plan {result.recipe}   |   mopt optimize {result.recipe}",
                  highlight=False)
