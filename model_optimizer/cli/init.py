"""`mopt init MODEL_DIR`: write a starting recipe for a model folder."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from model_optimizer.cli.common import JsonOption, console, err_console, handle_errors, print_json
from model_optimizer.errors import UsageError
from model_optimizer.fsutil import atomic_write_text
from model_optimizer.onboard.detect import SeenHardware, known_accelerators, seen_hardware
from model_optimizer.onboard.init import WorkloadChoice, build_init_recipe, with_prompt_file
from model_optimizer.onboard.quality import write_quality_files
from model_optimizer.plan.accelerators import canonical_accelerator


def _hardware(accelerator: str | None, memory_gib: float | None, count: int | None
              ) -> SeenHardware:
    seen = seen_hardware()
    if accelerator is not None and accelerator not in known_accelerators():
        accelerator = canonical_accelerator(accelerator)  # case, aliases; else did-you-mean
    if accelerator is None or accelerator == seen.accelerator:
        hw = seen
    else:
        hw = SeenHardware(accelerator, 1, None, f"{accelerator} (named, not seen here)")
    if memory_gib is not None:
        hw = SeenHardware(hw.accelerator, hw.count, memory_gib, hw.description)
    if count is not None:
        hw = SeenHardware(hw.accelerator, count, hw.memory_gib, hw.description)
    return hw


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
    if not model_dir.is_dir():
        raise UsageError(f"{model_dir}: not a folder (give the model folder with config.json)")
    target = output or Path("recipes") / f"{(name or model_dir.resolve().name)}.yaml"
    if target.exists() and not force:
        raise UsageError(f"{target}: exists; pass --force to overwrite or --output FILE")
    work = WorkloadChoice(prompt_tokens, output_tokens)
    if prompts is not None:
        work = with_prompt_file(work, prompts, model_dir)
    hw = _hardware(accelerator, memory_gib, count)
    result = build_init_recipe(model_dir, target, hw, work, name)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, result.text)
    write_quality_files(result.files, target)
    if work.warning:
        err_console.print(f"[yellow]warning:[/] {escape(work.warning)}", highlight=False,
                          soft_wrap=True)
    if as_json:
        print_json({"ok": True, "recipe": str(target), "name": result.name,
                    "plan": result.plan_verdict, "choices": result.choices,
                    "warnings": [work.warning] if work.warning else []})
        return
    console.print(f"wrote {target} ({result.name}, {hw.description}); plan: "
                  f"{result.plan_verdict}", highlight=False)
    for problem in result.choices["problems"]:
        console.print(f"[bold red]problem:[/] {problem}", highlight=False)
    console.print(f"next: mopt plan {target}   |   mopt optimize {target}", highlight=False)
