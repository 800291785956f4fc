"""``mopt tune`` below the command line: preflight, the quality gate a knob that changes the
answers needs, then the study (``search/tune/loop.py``), new, joined or resumed.

    outcome = tune(Path("recipes/tiny-cpu.yaml"), TuneFlags(n_trials=8))
    outcome.best, outcome.written, outcome.exit_code

The tune package loads optuna, so it is imported when a tune is called, not with this
module.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from model_optimizer.archive import runs_dir
from model_optimizer.errors import UsageError
from model_optimizer.events import EventCallback
from model_optimizer.recipe import LoadedRecipe, Overrides, load_recipe
from model_optimizer.signals import terminate_as_interrupt
from model_optimizer.usecase.notices import NoticeCallback, preflight_of
from model_optimizer.usecase.search import check_resume

if TYPE_CHECKING:
    from model_optimizer.search.tune.loop import TuneOutcome
    from model_optimizer.search.tune.space import TuneFlags

#: what a tune's archive holds besides its trials (the command line names them)
TUNE_FILES = "report.md, trials.csv, study.db, history.png, pareto.png"


def refuse_resume_settings(recipe: object, overrides: Overrides | None,
                           flags: TuneFlags) -> None:
    """A resumed tune runs with its archived recipe and settings; only ``n_trials`` (the
    budget, extended) may be given with it."""
    if recipe is not None or overrides or any(
            value is not None for value in (flags.max_minutes, flags.sampler, flags.seed,
                                            flags.strategy)):
        raise UsageError("--resume continues a tune with its archived recipe and "
                         "settings; give no RECIPE, --set, --sampler, --seed, "
                         "--scan/--no-scan or --max-minutes with it (--n-trials extends "
                         "the budget)")


def tune(recipe: Path | LoadedRecipe | None = None, flags: TuneFlags | None = None, *,
         overrides: Overrides | None = None, runs_base: Path | None = None,
         storage: str | None = None, study_name: str | None = None,
         output: Path | None = None, model_config: Path | None = None, force: bool = False,
         no_quality_gate: bool = False, resume: Path | None = None,
         on_event: EventCallback | None = None,
         on_notice: NoticeCallback | None = None) -> TuneOutcome:
    """Tune the engine knobs of ``recipe``'s tune.params (a file with ``overrides``, or a
    loaded recipe; ``flags``: what is asked beyond its tune section) and write the best
    feasible trial as a new revision (``output``: elsewhere than the recipe file); or,
    with ``resume``, continue the interrupted tune archived there (no recipe then; with
    ``flags.n_trials`` a larger budget).

    ``storage`` (e.g. ``postgresql://...``, default SQLite in the archive) and
    ``study_name`` share one study between workers. Preflighted first (PreflightError
    unless ``force``, warnings told to ``on_notice``); a knob that changes the model's
    answers needs the recipe's quality gate unless ``no_quality_gate``. SIGTERM, SIGHUP
    and SIGQUIT end it as Ctrl-C does (resumable)."""
    from model_optimizer.quality.search_gate import require_gate
    from model_optimizer.search.tune.loop import resume_tune, start_tune
    from model_optimizer.search.tune.space import TuneFlags

    terminate_as_interrupt()
    flags = flags or TuneFlags()
    if resume is not None:
        refuse_resume_settings(recipe, overrides, flags)
        check_resume(resume, force, on_notice)
        return resume_tune(resume, storage=storage, n_trials=flags.n_trials,
                           on_event=on_event)
    if recipe is None:
        raise UsageError("tune: give a recipe, or resume= an interrupted tune")
    loaded = recipe if isinstance(recipe, LoadedRecipe) else load_recipe(recipe, overrides)
    base = runs_dir(runs_base)
    preflight_of(loaded, base, on_notice, force=force)
    require_gate(loaded, [f"engine.{name}" for name in loaded.resolved["tune"]["params"]],
                 no_quality_gate, "mopt tune")
    return start_tune(loaded, base, flags=flags, storage=storage, study_name=study_name,
                      output=output, model_config=model_config, on_event=on_event)
