"""What a scanning tune's trials and its confirmation need from the tune that runs them.

:class:`ScanHost` is the small interface ``TuneRunner`` (``search/tune/loop.py``) builds for
:class:`~model_optimizer.search.tune.scan.TrialScanner` and the confirmation
(``search/tune/confirm.py``), so that neither reaches the runner; the search simulator builds one
with a simulated engine (``search/simulate/tunedrive.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import optuna

from model_optimizer.events import EventCallback
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.runner import RunOutcome, run_recipe
from model_optimizer.search.core.scan import ScanServer
from model_optimizer.search.core.session import SearchSession
from model_optimizer.search.tune.evaluate import TrialResult
from model_optimizer.search.tune.space import TuneConfig


@dataclass(frozen=True)
class ScanHost:
    """What scanning trials need from the tune that runs them (built by ``TuneRunner``):
    the recipe, the study and its settings, the session steps go to, the tune state's
    confirmations, and three callbacks. The scanner reaches nothing else of the runner."""

    loaded: LoadedRecipe
    config: TuneConfig
    study: optuna.Study
    bounds: dict
    hardware: str
    machine: str
    tune_id: str
    study_name: str
    session: SearchSession
    confirmations: list[dict]  # the tune state's own list: appended to, then saved
    emit: EventCallback
    measure: Callable[[LoadedRecipe, int, dict], TrialResult]
    tell: Callable[..., dict]  # (trial, params, result, extra attrs) -> the trial's record
    # the engine, replaceable by a simulated one (``search/simulate/tuning.py``): the scan server
    # (ScanServer's signature) and the confirming run (run_recipe's)
    open_server: Callable[..., ScanServer] = ScanServer
    run_one: Callable[..., RunOutcome] = run_recipe
