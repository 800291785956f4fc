"""`mopt tiny-model`: build the tiny local Llama used by the CPU default recipe."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from model_optimizer.cli.common import console, handle_errors

DEFAULT_DIR = Path("models/tiny-llama")
TRAINED_DIR = Path("models/tiny-llama-trained")
BED_DIR = Path("models/bed-llama")


@handle_errors
def tiny_model(
    out_dir: Annotated[Path, typer.Argument(help="Folder to write the model to.")] = DEFAULT_DIR,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if present.")] = False,
    trained: Annotated[bool, typer.Option(
        "--trained", help="Train it (a fixed number of steps, 9 minutes measured on 2 busy cores) "
                          "on a synthetic corpus of counting, copying and arithmetic in words, "
                          "so quality figures mean something (recipes/tiny-trained-cpu.yaml "
                          "serves it from models/tiny-llama-trained).")] = False,
    bed: Annotated[bool, typer.Option(
        "--bed", help="The engine-paced bed's model instead (~89 M parameters, random weights, "
                      "~180 MB; recipes/bed-cpu.yaml serves it from models/bed-llama): its "
                      "decode step, not the client, sets the pace on 2 cores.")] = False,
) -> None:
    """Build a tiny Llama model (random weights, locally trained tokenizer; no download).

    recipes/tiny-cpu.yaml serves it from models/tiny-llama. With --trained the weights are
    trained on CPU on a deterministic synthetic corpus. Needs transformers and tokenizers
    (installed by the [cpu] extra).
    """
    if trained:
        from model_optimizer.models.trained import build_trained_model

        target = TRAINED_DIR if out_dir == DEFAULT_DIR else out_dir
        path = build_trained_model(target, force=force, on_step=_training_progress)
    elif bed:
        from model_optimizer.models.tiny import BED_SPEC, build_tiny_model

        target = BED_DIR if out_dir == DEFAULT_DIR else out_dir
        path = build_tiny_model(target, spec=BED_SPEC, force=force)
    else:
        from model_optimizer.models.tiny import build_tiny_model

        path = build_tiny_model(out_dir, force=force)
    console.print(f"tiny model ready: {path}", highlight=False)


def _training_progress(step: int, steps: int, loss: float) -> None:
    if step == 1 or step % 50 == 0 or step == steps:
        console.print(f"training step {step}/{steps}: loss {loss:.3f}", highlight=False)
