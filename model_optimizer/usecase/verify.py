"""``mopt verify`` below the command line: drift, the preflight of a launch (none for a
running server), the target, the measurement and its verdict; ``--retune``'s sweep of a
revision that regressed.

    result = verify(Path("recipes/tiny-cpu.yaml"))
    result.word, result.exit_code
    if needs_retune(result):
        retune(result).written
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from model_optimizer.archive import runs_dir
from model_optimizer.engine.factory import EngineFactory
from model_optimizer.errors import EXIT_SLO_FAILED
from model_optimizer.events import EventCallback
from model_optimizer.recipe import LoadedRecipe, Overrides, load_recipe
from model_optimizer.signals import terminate_as_interrupt
from model_optimizer.usecase.endpoint import endpoint_model
from model_optimizer.usecase.notices import NoticeCallback, drift_of, preflight_of
from model_optimizer.usecase.sweep import sweep
from model_optimizer.verify import Target, VerifyResult
from model_optimizer.verify import verify as measure_again

if TYPE_CHECKING:
    from model_optimizer.search.sweep.loop import SweepOutcome


def target_of(url: str | None, loaded: LoadedRecipe, model: str | None,
              tokenizer: Path | None) -> Target:
    """A launch (no URL), or the server at ``url``: its model and where tokens are counted."""
    if url is None:
        return Target()
    url = url.rstrip("/")
    model_name, tokenizer_dir = endpoint_model(url, loaded, model, tokenizer,
                                               recipe_given=True)
    return Target(url, model_name, tokenizer_dir)


def verify(recipe: Path | LoadedRecipe, *, overrides: Overrides | None = None,
           url: str | None = None, model: str | None = None, tokenizer: Path | None = None,
           runs_base: Path | None = None, force: bool = False,
           on_event: EventCallback | None = None, on_notice: NoticeCallback | None = None,
           engine_factory: EngineFactory | None = None) -> VerifyResult:
    """Measure ``recipe``'s validated revision again (a file, with ``overrides``, or a
    loaded recipe), with the validating run's workload, and judge it against the figures
    that validated it (archived under ``runs_base``, kind verify).

    Drift from the validated block is told to ``on_notice`` (never refused here); a launch
    is preflighted first (PreflightError on a refusal unless ``force``, warnings told).
    With ``url`` the server running there is measured instead (``model``: the one to
    request, default its only one; ``tokenizer``: where prompt tokens are counted, default
    the recipe's model). SIGTERM, SIGHUP and SIGQUIT then end it as Ctrl-C does. Its exit
    code: 0 holds, 4 regressed, 2 not judged (a client-bound window), 3/5 the run failed."""
    loaded = recipe if isinstance(recipe, LoadedRecipe) else load_recipe(recipe, overrides)
    base = runs_dir(runs_base)
    drift_of(loaded, base, on_notice)
    if url is None:
        preflight_of(loaded, base, on_notice, force=force)
    target = target_of(url, loaded, model, tokenizer)
    terminate_as_interrupt()
    return measure_again(loaded, base, target=target, on_event=on_event,
                         engine_factory=engine_factory)


def needs_retune(result: VerifyResult) -> bool:
    """True when ``result`` regressed (exit 4): what ``mopt verify --retune`` sweeps on."""
    return result.exit_code == EXIT_SLO_FAILED


def retune(result: VerifyResult, *, runs_base: Path | None = None, force: bool = False,
           on_event: EventCallback | None = None,
           on_notice: NoticeCallback | None = None) -> SweepOutcome:
    """``mopt verify --retune``: sweep the verified recipe file again (without --set, its
    sweep section as written) and write the chosen revision; the sweep's outcome, whose
    exit code is the command's."""
    return sweep(Path(result.recipe_file), runs_base=runs_base, force=force,
                 on_event=on_event, on_notice=on_notice)
