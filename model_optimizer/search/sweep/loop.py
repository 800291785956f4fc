"""The sweep loop: ask the strategy for a value, measure it, repeat; then choose, confirm the
choice with a sustained run and write it as a recipe revision.

The archive, ``state.json``, the clock and sealing are the search core's
(:class:`~model_optimizer.search.core.session.SearchSession`); the steps, the sweep's own state
(config, history, decisions) and the time budget checked before each step are
``search/sweep/steps.py``'s and ``search/sweep/budget.py``'s; the search is the registered
strategy's (``search/sweep/strategies/``), the choice and its confirmation
``search/sweep/choice.py``'s. Because the strategy is a pure function of the history, a resumed
sweep ends exactly where an uninterrupted one would have.
"""

from __future__ import annotations

from pathlib import Path

from model_optimizer.errors import UsageError
from model_optimizer.plan import load_model_config
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.runner import tied_concurrency
from model_optimizer.search.core.revision import default_model_config
from model_optimizer.search.core.session import EventCallback, SearchSession, read_search_archive
from model_optimizer.search.sweep.choice import KIND
from model_optimizer.search.sweep.flags import SweepFlags, build_config, sweep_objective
from model_optimizer.search.sweep.outputs import write_outputs
from model_optimizer.search.sweep.probe import resolve_strategy, scan_ceiling
from model_optimizer.search.sweep.state import SweepOutcome, SweepState
from model_optimizer.search.sweep.steps import Measure, SweepSteps
from model_optimizer.search.sweep.strategies import SweepStrategy

__all__ = ["KIND", "Measure", "SweepRunner", "resume_sweep", "start_sweep"]


class SweepRunner:
    """Runs one sweep (new or resumed) in its search session, with the strategy its state
    names."""

    def __init__(self, session: SearchSession, measure: Measure | None = None,
                 engine_factory=None):
        self.session = session
        self.steps = SweepSteps(session, measure, engine_factory)
        self.state = self.steps.state

    def run(self) -> SweepOutcome:
        """Search, choose, confirm, write; archive as it goes. Re-raises KeyboardInterrupt."""
        return self.session.run(self._search_and_choose, self._finish, self._interrupted)

    def _search_and_choose(self) -> SweepOutcome:
        strategy = SweepStrategy.resolve(self.state.strategy)(self.steps)
        return strategy.search().outcome()

    def _finish(self, outcome: SweepOutcome) -> tuple[str, dict]:
        write_outputs(self.session.archive, self.session.loaded, self.state, outcome.chosen,
                      outcome.reason, written=outcome.written)
        return outcome.status, {"chosen": outcome.chosen.value if outcome.chosen else None,
                                "written": str(outcome.written) if outcome.written else None}

    def _interrupted(self) -> None:
        write_outputs(self.session.archive, self.session.loaded, self.state, None,
                      "interrupted")


def start_sweep(loaded: LoadedRecipe, runs_base: str | Path, *,
                flags: SweepFlags | None = None, output: Path | None = None,
                model_config: Path | None = None, on_event: EventCallback | None = None,
                measure: Measure | None = None, engine_factory=None) -> SweepOutcome:
    """Begin a new sweep of ``loaded`` and run it to the end (``flags``: what the caller
    asks beyond the recipe's sweep section; ``engine_factory``: the scan and confirmation
    servers, vLLM by default, the mock server in tests)."""
    recipe, flags = loaded.resolved, flags or SweepFlags()
    requested = flags.strategy or loaded.spec.sweep.strategy
    config = build_config(recipe, flags)
    strategy, why = resolve_strategy(requested, recipe, config)
    model_config_path = default_model_config(loaded, model_config)
    if SweepStrategy.resolve(strategy).scans:
        config.max = scan_ceiling(loaded, config, load_model_config(model_config_path)
                                  if model_config_path else None)
    state = SweepState(
        config=config, recipe_file=str(loaded.path), overrides=list(loaded.overrides),
        tie_concurrency=config.param == "max_num_seqs" and tied_concurrency(recipe),
        objective=sweep_objective(loaded.spec),
        output=str(output or loaded.path), model_config=model_config_path,
        strategy=strategy, strategy_reason=why, strict=flags.strict,
        budget=flags.budget if flags.budget is not None else loaded.spec.sweep.budget)
    session = SearchSession.create(KIND, loaded, runs_base, lambda archive: state, on_event)
    session.announce()
    return SweepRunner(session, measure, engine_factory).run()


def resume_sweep(sweep_dir: Path, *, on_event: EventCallback | None = None,
                 measure: Measure | None = None) -> SweepOutcome:
    """Continue an interrupted sweep from its archive without rerunning finished steps."""
    state, finished = read_search_archive(KIND, sweep_dir, SweepState)
    if finished:
        raise UsageError(f"{sweep_dir}: this sweep already finished; nothing to resume")
    session = SearchSession.resume(KIND, sweep_dir, state, on_event)
    session.announce(resumed=len(state.history))
    return SweepRunner(session, measure).run()
