"""`mopt quantize RECIPE`: one-shot weight quantization, then a revision that serves and pins it."""

from __future__ import annotations

from typing import Annotated

import typer

from model_optimizer.archive import runs_dir
from model_optimizer.cli.common import (
    JsonOption,
    RevisionOutputOption,
    RunsDirOption,
    SetOption,
    console,
    handle_errors,
    print_json,
    progress_console,
)
from model_optimizer.cli.current import OptionalRecipeArg, recipe_or_current
from model_optimizer.events import Event, QuantizeStage, QuantizeStarted
from model_optimizer.usecase.quantize import quantize as run_quantize


@handle_errors
def quantize(
    recipe: OptionalRecipeArg = None,
    scheme: Annotated[str | None, typer.Option(help="w4a16, w8a8, fp8_dynamic or nvfp4 "
                      "(GPU-only); short for --set quantize.scheme=...")] = None,
    output: RevisionOutputOption = None,
    force: Annotated[bool, typer.Option("--force", help="Replace an existing checkpoint "
                     "folder.")] = False,
    overrides: SetOption = None,
    runs_dir_opt: RunsDirOption = None,
    as_json: JsonOption = False,
) -> None:
    """Quantize the recipe's model with llm-compressor (GPTQ W4A16, SmoothQuant+GPTQ W8A8,
    FP8 dynamic), calibrated on quantize.calibration.file (your prompts) or built-in text.

    Runs in the quantization environment (bash examples/setup-quant.sh), writes the
    compressed-tensors checkpoint (default: next to the model, <model>-<scheme>), and
    writes the next recipe revision serving it, with model.pins: the checkpoint's SHA-256,
    the source model and its hash, and the quantize section. apply/validate then warn
    when the checkpoint on disk changes (--strict refuses). Exit 0; 2 bad input; 3 the
    quantizer failed; 130 interrupted.
    """
    say = progress_console(as_json)
    path = recipe_or_current(recipe, "quantize", say, runs_dir_opt)

    def on_event(event: Event) -> None:
        if isinstance(event, QuantizeStarted):
            say.print(f"quantize {event.scheme}: calibration {event.calibration}; "
                      f"archive {event.archive}", highlight=False)
        elif isinstance(event, QuantizeStage):
            say.print(f"  {event.text}", highlight=False)

    result = run_quantize(path, scheme=scheme, overrides=overrides, output=output,
                          force=force, runs_base=runs_dir(runs_dir_opt), on_event=on_event)
    if as_json:
        print_json(result.to_dict())
        return
    console.print(f"checkpoint {result.checkpoint} (sha256 {result.pins['sha256'][:12]}) in "
                  f"{result.seconds:.1f} s", highlight=False)
    console.print(f"wrote {result.recipe_file}: serves it and pins it; next: mopt apply "
                  f"{result.recipe_file}", highlight=False)
