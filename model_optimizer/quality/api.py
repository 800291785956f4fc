"""The quality stage's public functions: evaluate a deployment, and gate a candidate.

Other commands (``sweep``, ``tune``, ``optimize``) call these::

    from model_optimizer.quality import gate, evaluate, quality_config

    base = evaluate(baseline_recipe, config=config, runs_base="runs")   # once
    verdict = gate(candidate_recipe, base.result, config=config, runs_base="runs")
    if not verdict.passed:
        print(verdict.summary)          # "quality gate failed: mean KL 0.02 above ..."
    verdict.figures                     # exact_match_rate, top1_agreement, mean_kl, ...

A baseline is a recipe (file path or LoadedRecipe: it is launched and evaluated first), an
eval archive (``runs/<id>``, an id or unique prefix; verified before it is read), or an
:class:`EvalResult` from an earlier :func:`evaluate`. A baseline evaluated with other
sampling parameters or another eval set is refused: the comparison would measure the
difference in sampling, not in the deployment.
"""

from __future__ import annotations

import json
from pathlib import Path

from model_optimizer.archive import runs_dir
from model_optimizer.errors import UsageError
from model_optimizer.events import EventCallback
from model_optimizer.quality.config import QualityConfig, quality_config
from model_optimizer.quality.evaluate import EvalOutcome, run_eval
from model_optimizer.quality.gate import GateResult
from model_optimizer.quality.result import QUALITY, EvalResult, load_eval
from model_optimizer.recipe import LoadedRecipe, load_recipe

Baseline = str | Path | LoadedRecipe | EvalResult


def _as_recipe(value: str | Path | LoadedRecipe) -> LoadedRecipe:
    return value if isinstance(value, LoadedRecipe) else load_recipe(Path(value))


def _is_recipe_file(value: object) -> bool:
    return isinstance(value, str | Path) and str(value).endswith((".yaml", ".yml"))


def _check_same_protocol(path: Path, config: QualityConfig) -> None:
    """Refuse a baseline archive evaluated with other sampling or another eval set."""
    recorded = json.loads((path / QUALITY).read_text(encoding="utf-8"))
    sampling = recorded.get("sampling") or {}
    ours = config.sampling.to_dict()
    differ = [f"{k} {sampling.get(k)!r} vs {v!r}" for k, v in ours.items()
              if sampling.get(k) != v]
    if differ:
        raise UsageError(f"{path}: the baseline was evaluated with other sampling parameters "
                         f"({'; '.join(differ)}); evaluate it again with the same quality "
                         "settings, or set them to match")


def load_baseline(baseline: Baseline, config: QualityConfig, runs_base: Path, *,
                  on_event: EventCallback | None = None) -> EvalResult:
    """The baseline's EvalResult: evaluated now (a recipe), or read from its archive."""
    if isinstance(baseline, EvalResult):
        return baseline
    if isinstance(baseline, LoadedRecipe) or _is_recipe_file(baseline):
        loaded = _as_recipe(baseline)
        outcome = run_eval(loaded, QualityConfig(**{**config.__dict__, "baseline": None}),
                           runs_base, on_event=on_event, name=f"{loaded.name}-baseline")
        if not outcome.result.ok:
            raise UsageError(f"the baseline {loaded.path or loaded.name} could not be "
                             f"evaluated ({outcome.result.status}: {outcome.result.failure}); "
                             f"see {outcome.result.archive}")
        return outcome.result
    from model_optimizer.history.archives import load

    view = load(str(baseline), runs_base)
    if view.kind != "eval" or not (view.path / QUALITY).is_file():
        raise UsageError(f"{baseline}: not an eval archive (kind {view.kind}); give a recipe "
                         "file or the id of a `mopt eval` run")
    if view.status_text != "ok":
        raise UsageError(f"{baseline}: that eval did not finish ({view.status_text})")
    _check_same_protocol(view.path, config)
    return load_eval(view.path, config)


def evaluate(recipe: LoadedRecipe | str | Path | None, *, config: QualityConfig | None = None,
             baseline: Baseline | None = None, url: str | None = None,
             model: str | None = None, tokenizer_dir: str | None = None,
             runs_base: str | Path | None = None,
             on_event: EventCallback | None = None) -> EvalOutcome:
    """Evaluate a deployment (launched from ``recipe``, or the server at ``url``).

    ``config`` defaults to the recipe's quality section; ``baseline`` to its
    ``quality.baseline``. With a baseline the outcome has ``comparison`` and ``gate``.
    """
    loaded = _as_recipe(recipe) if recipe is not None else None
    if config is None:
        if loaded is None:
            raise UsageError("evaluate needs a recipe or an explicit QualityConfig")
        config = quality_config(loaded.resolved, loaded.base_dir)
    if not config.enabled:
        raise UsageError("nothing to evaluate: set quality.eval_set or quality.lm_eval.tasks "
                         "in the recipe (or --eval-set / --lm-eval-task)")
    base_path = runs_dir(runs_base)
    baseline = baseline if baseline is not None else config.baseline
    reference = (load_baseline(baseline, config, base_path, on_event=on_event)
                 if baseline is not None else None)
    return run_eval(loaded, config, base_path, reference=reference, url=url, model=model,
                    tokenizer_dir=tokenizer_dir, on_event=on_event)


def gate(candidate: LoadedRecipe | str | Path, baseline: Baseline | None = None, *,
         config: QualityConfig | None = None, runs_base: str | Path | None = None,
         on_event: EventCallback | None = None) -> GateResult:
    """Evaluate ``candidate`` against ``baseline`` and return the gate's verdict.

    ``passed`` is False with reasons when a threshold fails, the candidate's eval fails, or
    no baseline is known. ``figures`` and the run ids come with it; the eval is archived
    (kind ``eval``) under ``runs_base``.
    """
    outcome = evaluate(candidate, config=config, baseline=baseline, runs_base=runs_base,
                       on_event=on_event)
    if outcome.gate is None:
        return GateResult(False, outcome.result.figures(),
                          ["no baseline: set quality.baseline or pass one"],
                          candidate_run=outcome.result.run_id)
    return outcome.gate


def quality_of(loaded: LoadedRecipe) -> QualityConfig:
    """The recipe's quality configuration (paths resolved from its folder)."""
    return quality_config(loaded.resolved, loaded.base_dir)
