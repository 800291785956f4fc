"""`mopt tiny-model`: build the tiny local Llama used by the CPU default recipe."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from model_optimizer.cli.common import console, handle_errors

DEFAULT_DIR = Path("models/tiny-llama")


@handle_errors
def tiny_model(
    out_dir: Annotated[Path, typer.Argument(help="Folder to write the model to.")] = DEFAULT_DIR,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if present.")] = False,
) -> None:
    """Build a tiny Llama model (random weights, locally trained tokenizer; no download).

    recipes/tiny-cpu.yaml serves it from models/tiny-llama. Needs transformers and
    tokenizers (installed by the [cpu] extra).
    """
    from model_optimizer.models.tiny import build_tiny_model

    path = build_tiny_model(out_dir, force=force)
    console.print(f"tiny model ready: {path}", highlight=False)
