"""``mopt sweep`` below the command line: preflight, the quality gate a knob that changes
the answers needs, then the sweep (``search/sweep/loop.py``), new or resumed.

    outcome = sweep(Path("recipes/tiny-cpu.yaml"), SweepFlags(param="max_num_seqs", start=8))
    outcome.chosen, outcome.written, outcome.exit_code
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from model_optimizer.archive import runs_dir
from model_optimizer.errors import UsageError
from model_optimizer.events import EventCallback
from model_optimizer.recipe import LoadedRecipe, Overrides, load_recipe
from model_optimizer.search.sweep.flags import SweepFlags
from model_optimizer.signals import terminate_as_interrupt
from model_optimizer.usecase.notices import NoticeCallback, preflight_of
from model_optimizer.usecase.search import check_resume

if TYPE_CHECKING:
    from model_optimizer.search.sweep.loop import SweepOutcome

#: what a sweep's archive holds besides its steps (the command line names them)
SWEEP_FILES = "report.md, summary.csv, plot.png"


def sweep(recipe: Path | LoadedRecipe | None = None, flags: SweepFlags | None = None, *,
          overrides: Overrides | None = None, runs_base: Path | None = None,
          output: Path | None = None, model_config: Path | None = None, force: bool = False,
          no_quality_gate: bool = False, resume: Path | None = None,
          on_event: EventCallback | None = None,
          on_notice: NoticeCallback | None = None) -> SweepOutcome:
    """Sweep one engine knob of ``recipe`` (a file with ``overrides``, or a loaded recipe;
    ``flags``: what is asked beyond its sweep section) and write the chosen revision
    (``output``: elsewhere than the recipe file); or, with ``resume``, continue the
    interrupted sweep archived there (no recipe then).

    Preflighted first (PreflightError unless ``force``, warnings told to ``on_notice``); a
    knob that changes the model's answers needs the recipe's quality gate unless
    ``no_quality_gate``. SIGTERM, SIGHUP and SIGQUIT end it as Ctrl-C does (resumable)."""
    from model_optimizer.quality.search_gate import require_gate
    from model_optimizer.search.sweep.loop import resume_sweep, start_sweep

    terminate_as_interrupt()
    if resume is not None:
        if recipe is not None or overrides:
            raise UsageError("--resume continues a sweep with its archived recipe and "
                             "settings; give no RECIPE or --set with it")
        check_resume(resume, force, on_notice)
        return resume_sweep(resume, on_event=on_event)
    if recipe is None:
        raise UsageError("sweep: give a recipe, or resume= an interrupted sweep")
    loaded = recipe if isinstance(recipe, LoadedRecipe) else load_recipe(recipe, overrides)
    base = runs_dir(runs_base)
    preflight_of(loaded, base, on_notice, force=force)
    flags = flags or SweepFlags()
    param = flags.param or loaded.resolved["sweep"]["param"]
    require_gate(loaded, [f"engine.{param}"], no_quality_gate, "mopt sweep")
    return start_sweep(loaded, base, flags=flags, output=output, model_config=model_config,
                       on_event=on_event)
