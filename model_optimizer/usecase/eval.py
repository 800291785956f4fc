"""``mopt eval`` below the command line: the recipe's quality configuration with the
command's changes, the preflight of a launch (none for a running server), interrupts, the
eval (and its comparison with a baseline), and the exit code of them all.

    result = evaluate(Path("recipes/tiny-trained-cpu.yaml"), baseline="runs/<id>")
    result.outcome.gate.passed, result.exit_code
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from model_optimizer.archive import runs_dir
from model_optimizer.errors import EXIT_OK, EXIT_RUN_FAILED, EXIT_SLO_FAILED, EXIT_START_FAILED
from model_optimizer.events import EventCallback
from model_optimizer.quality import evaluate as run_eval
from model_optimizer.quality import quality_of
from model_optimizer.quality.config import LmEvalConfig, QualityConfig
from model_optimizer.quality.evaluate import EvalOutcome
from model_optimizer.recipe import LoadedRecipe, Overrides, load_recipe
from model_optimizer.signals import terminate_as_interrupt
from model_optimizer.usecase.notices import NoticeCallback, preflight_of


@dataclass(frozen=True)
class EvaluateResult:
    """One eval (``outcome``: its result, and with a baseline its comparison and gate), and
    what the preflight said before the launch."""

    outcome: EvalOutcome
    preflight: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 evaluated (and the gate passed, when there is one); 3 the server did not start;
        5 the eval failed; 4 the gate failed."""
        result = self.outcome.result
        if not result.ok:
            return EXIT_START_FAILED if (result.archive / "failure.json").is_file() \
                else EXIT_RUN_FAILED
        gate = self.outcome.gate
        return EXIT_SLO_FAILED if gate is not None and not gate.passed else EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        """``mopt eval --json``: the eval's summary."""
        return self.outcome.to_dict()


def eval_config(loaded: LoadedRecipe, *, eval_set: Path | None = None,
                lm_eval_tasks: list[str] | None = None,
                repeats: int | None = None) -> QualityConfig:
    """``loaded``'s quality section with the command's ``--eval-set``, ``--lm-eval-task``
    and ``--repeats`` in place of its own (None, empty: the recipe's)."""
    config = quality_of(loaded)
    if eval_set is not None:
        config = config.with_overrides(eval_set=str(eval_set.resolve()))
    if lm_eval_tasks:
        config = replace(config, lm_eval=replace(config.lm_eval or LmEvalConfig(),
                                                 tasks=tuple(lm_eval_tasks)))
    return config.with_overrides(repeats=repeats)


def evaluate(recipe: Path | LoadedRecipe, *, overrides: Overrides | None = None,
             baseline: str | None = None, url: str | None = None, model: str | None = None,
             eval_set: Path | None = None, lm_eval_tasks: list[str] | None = None,
             repeats: int | None = None, runs_base: Path | None = None, force: bool = False,
             on_event: EventCallback | None = None,
             on_notice: NoticeCallback | None = None) -> EvaluateResult:
    """Evaluate ``recipe``'s answers (a file, with ``overrides``, or a loaded recipe) on its
    eval set and lm-eval tasks (``eval_set``, ``lm_eval_tasks``, ``repeats`` replace the
    recipe's), archived under ``runs_base`` as an ``eval`` run.

    ``baseline`` (a recipe file, launched and evaluated first, or an eval archive; default
    the recipe's quality.baseline) adds the comparison and the gate's verdict. A launch is
    preflighted first (PreflightError on a refusal unless ``force``, warnings told to
    ``on_notice``); with ``url`` the server running there (``model``: the one to request) is
    evaluated instead. SIGTERM, SIGHUP and SIGQUIT then end it as Ctrl-C does. UsageError
    (exit 2, nothing archived) for nothing to evaluate or a broken eval set."""
    loaded = recipe if isinstance(recipe, LoadedRecipe) else load_recipe(recipe, overrides)
    base = runs_dir(runs_base)
    config = eval_config(loaded, eval_set=eval_set, lm_eval_tasks=lm_eval_tasks,
                         repeats=repeats)
    warnings = [] if url is not None else preflight_of(loaded, base, on_notice, force=force)
    terminate_as_interrupt()
    outcome = run_eval(loaded, config=config, baseline=baseline, url=url, model=model,
                       runs_base=base, on_event=on_event)
    return EvaluateResult(outcome, warnings)
