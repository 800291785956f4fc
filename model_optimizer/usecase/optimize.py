"""``mopt optimize`` below the command line: a model folder's first recipe (as ``mopt init``
writes it), the preflight, then the pipeline (``search/optimize/pipeline.py``: baseline,
candidates gated on quality, a sweep on the survivor), new or resumed.

    outcome = optimize(Path("models/tiny-llama"))
    outcome.survivor, outcome.written, outcome.exit_code
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from model_optimizer.archive import runs_dir
from model_optimizer.errors import UsageError
from model_optimizer.events import EventCallback
from model_optimizer.recipe import LoadedRecipe, Overrides, load_recipe
from model_optimizer.signals import terminate_as_interrupt
from model_optimizer.usecase.notices import INIT, NoticeCallback, preflight_of, tell

if TYPE_CHECKING:
    from model_optimizer.search.optimize.pipeline import OptimizeOutcome

#: what an optimize's archive holds besides its stages (the command line names them)
OPTIMIZE_FILES = "report.md, summary.csv, plot.png"


def recipe_for(target: Path, output: Path | None,
               on_notice: NoticeCallback | None = None) -> Path:
    """A recipe file: ``target`` itself, or, for a model folder, the one ``mopt init``
    writes (at ``output``, default ``recipes/<folder name>.yaml``; UsageError when it
    exists), with its quality files, told to ``on_notice``."""
    if not target.is_dir():
        return target
    from model_optimizer.usecase.init import init

    recipe = output or Path("recipes") / f"{target.resolve().name}.yaml"
    if recipe.exists():
        raise UsageError(f"{recipe}: exists; optimize it with `mopt optimize {recipe}`, or "
                         "pass --output for a new file")
    written = init(target, output=recipe)
    tell(on_notice, INIT, [f"wrote {recipe} with `mopt init` (plan: {written.plan})"])
    return recipe


def optimize(target: Path | LoadedRecipe | None = None, *,
             overrides: Overrides | None = None, output: Path | None = None,
             resume: Path | None = None, force: bool = False, no_quality_gate: bool = False,
             runs_base: Path | None = None, on_event: EventCallback | None = None,
             on_notice: NoticeCallback | None = None) -> OptimizeOutcome:
    """Optimize ``target`` (a recipe file with ``overrides``, a loaded recipe, or a model
    folder, whose recipe is written first: :func:`recipe_for`) and write the validated
    revision (``output``: elsewhere than the recipe file); or, with ``resume``, continue
    the interrupted pipeline archived there (no target then).

    ``force`` replaces existing quantized checkpoint folders. Preflighted first
    (PreflightError on a refusal, warnings told to ``on_notice``); a candidate that changes
    the model's answers needs the recipe's quality gate unless ``no_quality_gate``.
    SIGTERM, SIGHUP and SIGQUIT end it as Ctrl-C does (resumable)."""
    from model_optimizer.search.optimize.pipeline import resume_optimize, start_optimize

    terminate_as_interrupt()
    if resume is not None:
        if target is not None or overrides:
            raise UsageError("--resume continues a pipeline with its archived recipe; give "
                             "no MODEL_DIR|RECIPE or --set with it")
        return resume_optimize(resume, on_event=on_event)
    if target is None:
        raise UsageError("give a MODEL_DIR or RECIPE to optimize, or --resume runs/<id>")
    loaded = target if isinstance(target, LoadedRecipe) else load_recipe(
        recipe_for(target, output, on_notice), overrides)
    base = runs_dir(runs_base)
    preflight_of(loaded, base, on_notice)  # a refusal: exit 2 before any launch
    return start_optimize(loaded, base, output=output, force=force,
                          no_quality_gate=no_quality_gate, on_event=on_event)
