"""``mopt quantize`` below the command line: the recipe with the scheme asked for,
interrupts, the quantizer in its own environment, and the next revision that serves and
pins the checkpoint (``quantize/run.py``).

    result = quantize(Path("recipes/tiny-cpu.yaml"), scheme="w4a16")
    result.checkpoint, result.recipe_file, result.pins["sha256"]
"""

from __future__ import annotations

from pathlib import Path

from model_optimizer.archive import runs_dir
from model_optimizer.errors import UsageError
from model_optimizer.events import EventCallback
from model_optimizer.quantize.run import QuantizeResult
from model_optimizer.quantize.run import quantize as make_and_pin
from model_optimizer.recipe import LoadedRecipe, Overrides, Variation, load_recipe
from model_optimizer.signals import terminate_as_interrupt

SCHEME_SOURCE = "mopt quantize --scheme"


def with_scheme(recipe: Path | LoadedRecipe, overrides: Overrides | None,
                scheme: str | None) -> LoadedRecipe:
    """``recipe`` (a file with ``overrides``, or loaded) with quantize.scheme set to
    ``scheme`` after the overrides (RecipeError names ``--scheme`` for one it refuses)."""
    extra = [Variation("quantize.scheme", scheme, SCHEME_SOURCE)] if scheme else []
    if isinstance(recipe, LoadedRecipe):
        return recipe.with_variations(extra) if extra else recipe
    return load_recipe(recipe, [*(overrides or []), *extra])


def quantize(recipe: Path | LoadedRecipe, *, scheme: str | None = None,
             overrides: Overrides | None = None, output: Path | None = None,
             force: bool = False, runs_base: Path | None = None,
             on_event: EventCallback | None = None) -> QuantizeResult:
    """Quantize ``recipe``'s model with llm-compressor (``scheme``: short for
    ``quantize.scheme``), calibrated on quantize.calibration.file or built-in text, and
    write the next revision serving and pinning the checkpoint to ``output`` (default over
    the recipe file); archived under ``runs_base`` as a ``quantize`` run.

    UsageError (exit 2) for a loaded recipe with no file and no ``output``, or an existing
    checkpoint folder without ``force``; QuantizeError (3) when the quantizer fails.
    SIGTERM, SIGHUP and SIGQUIT end it as Ctrl-C does."""
    terminate_as_interrupt()
    loaded = with_scheme(recipe, overrides, scheme)
    target = output or loaded.path
    if target is None:
        raise UsageError("this recipe has no file: give output, the file the revision "
                         "goes to")
    return make_and_pin(loaded, runs_dir(runs_base), target, force=force, on_event=on_event)
