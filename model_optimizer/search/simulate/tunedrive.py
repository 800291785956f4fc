"""Drive the real tune against a simulated surface, one tune per call.

The steps are the tune loop's (``search/tune/loop.py``) in the same order, calling the same code:
the recipe's ``tune`` section as :class:`~model_optimizer.search.tune.space.TuneConfig`, optuna's
study and sampler (:func:`~model_optimizer.search.tune.study.open_study`,
:func:`~model_optimizer.search.tune.study.make_sampler`, the seeds of
:func:`~model_optimizer.search.tune.loop.enqueue_seeds`), trials until
:func:`~model_optimizer.search.tune.loop.stop_reason`, a repeated configuration copied
(:func:`~model_optimizer.search.tune.trials.copy_twin`), every other trial a scanning trial of the
real :class:`~model_optimizer.search.tune.scan.TrialScanner` (one launch per combination of the
other knobs, max_num_seqs scanned on it, every level told to optuna), then the best feasible trial
confirmed by a launch of its own, its runner-up side by side where it may be as good
(``TrialScanner.confirm``, ``search/tune/confirm.py``). Only the engine is simulated
(:class:`~model_optimizer.search.simulate.tuning.SimEngine`); the study lives in memory, nothing is
archived, nothing sleeps. The tune's warning is the confirmation's: "not resolved" when the
written configuration's own launch reads below its scan figure, when the pooled noise is above
the plateau threshold, when the range above it that a failure cut off may hide the best, or
when it is not shown ahead of another combination of the other knobs by the margin.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import optuna

from model_optimizer.recipe import LoadedRecipe, load_recipe_text
from model_optimizer.search.simulate.bench import Bench, Noise
from model_optimizer.search.simulate.truth import Surface
from model_optimizer.search.simulate.tuning import SimEngine
from model_optimizer.search.tune.evaluate import TrialResult, slo_bounds, trial_verdict
from model_optimizer.search.tune.host import ScanHost
from model_optimizer.search.tune.loop import enqueue_seeds, stop_reason
from model_optimizer.search.tune.outputs import ranked_feasible
from model_optimizer.search.tune.scan import TrialScanner, resolve_scan
from model_optimizer.search.tune.space import TuneConfig
from model_optimizer.search.tune.study import make_sampler, open_study, study_budget
from model_optimizer.search.tune.trials import copy_twin, finished_twin, tell_verdict

SLO_TTFT_MS = 2000.0
RECIPE = """recipe_version: 1
name: simulated
model: {{path: /simulated/model, served_name: simulated}}
engine: {{block_size: 32, max_model_len: 512, max_num_seqs: 8,
         max_num_batched_tokens: 2048}}
hardware: {{accelerator: cpu, memory_gib: 2}}
workload: {{endpoint: completions, prompt_tokens: 64, output_tokens: 32, concurrency: null,
           duration_s: 20}}
slo: {{ttft_p99_ms: {slo}, min_success_rate: 1.0}}
tune:
  params:
    max_num_seqs: {{type: int_log, low: {low}, high: {high}}}
    {knob}: {{type: categorical, choices: {choices}}}
  n_trials: {n_trials}
  sampler: {sampler}
  seed: {seed}
"""


@dataclass(frozen=True)
class TuneRun:
    """What one simulated tune ended with."""

    chosen: dict | None      # the written configuration; None: no revision written
    launches: int
    trials: int              # budgeted (asked) trials
    windows: int
    wall_s: float
    warned: bool = False     # the confirmation said "not resolved"
    seed: int | None = None  # the repetition's seed (tune.seed and the noise's)
    warnings: tuple[str, ...] = ()   # why not resolved (the confirmation's warnings)


def recipe_for(surface: Surface, seed: int, *, n_trials: int = 12,
               sampler: str = "tpe") -> LoadedRecipe:
    """A recipe whose tune searches ``surface``'s space (max_num_seqs x its knob)."""
    curve = surface.curve
    return load_recipe_text(RECIPE.format(
        slo=SLO_TTFT_MS, low=curve.low, high=curve.high, knob=surface.knob,
        choices=list(surface.effects), n_trials=n_trials, sampler=sampler, seed=seed),
        "simulated.yaml")


def run_tune(surface: Surface, noise: Noise, seed: int, *, n_trials: int = 12,
             sampler: str = "tpe") -> TuneRun:
    """One seeded tune of ``surface`` under ``noise``."""
    loaded = recipe_for(surface, seed, n_trials=n_trials, sampler=sampler)
    config = TuneConfig.from_recipe(loaded.resolved["tune"])
    scan, why = resolve_scan(config.strategy, config, loaded.resolved, False)
    if not scan:
        raise ValueError(f"the simulated tune must scan: {why}")
    bench = Bench(surface.curve, noise, seed)
    engine = SimEngine(surface, bench, SLO_TTFT_MS, config.metric)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study, _ = open_study(optuna.storages.InMemoryStorage(), "simulated", config,
                          optuna.samplers.RandomSampler())
    budget = study_budget(study, config, None)
    study.sampler = make_sampler(config, config.seed)  # a new local study: the recipe's seed
    scanner = TrialScanner(_host(loaded, config, study, engine))
    enqueue_seeds(study, config, loaded.resolved["engine"], budget, None, True)
    asked = 0
    while stop_reason(study.get_trials(deepcopy=False), budget, config) is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            trial = study.ask()
        asked += 1
        params = {spec.name: spec.suggest(trial) for spec in config.params}
        twin = finished_twin(study, params, trial.number)
        if twin is not None:
            copy_twin(study, trial, twin)
        else:
            scanner.run(trial, params)
    ranked = ranked_feasible(study.get_trials(deepcopy=False), config)
    verdict = scanner.confirm(ranked) if ranked else None
    chosen = verdict.trial if verdict is not None else None
    return TuneRun(dict(chosen.params) if chosen is not None else None, bench.launches,
                   asked, bench.windows, bench.clock,
                   verdict is not None and not verdict.resolved, seed,
                   verdict.warnings if verdict is not None else ())


def _host(loaded: LoadedRecipe, config: TuneConfig, study: optuna.Study,
          engine: SimEngine) -> ScanHost:
    """What the scanner needs, with the simulated engine and no archive."""
    bounds = slo_bounds(loaded.resolved)

    def tell(trial, params: dict, result: TrialResult, extra: dict | None = None) -> dict:
        verdict = trial_verdict(result, bounds, config, "simulated", "simulated")
        return tell_verdict(study, trial, params, verdict, extra)
    return ScanHost(loaded, config, study, bounds, "simulated", "simulated", "simulated",
                    "simulated", _NoSession(), [], _ignore, engine.measure, tell,
                    engine.scan_server, engine.run_one)


class _NoSession:
    """The search session's part the scanner reads: no model config (no planner), no steps
    folder, nothing to save."""

    model_config = None
    steps_dir = None

    def save(self) -> None:
        """Nothing is archived."""


def _ignore(event) -> None:
    """Progress events go nowhere."""
