"""The tune stage: ``mopt tune`` searches several engine knobs at once with optuna.

The recipe's ``tune`` section is the space (:mod:`.space`); each trial is measured by the same
``measure_configuration`` as a sweep step and scored with the recipe's SLOs as optuna
constraints (:mod:`.evaluate`); the study lives in SQLite inside the archive or in a shared
PostgreSQL database for several workers (:mod:`.study`); :mod:`.loop` runs one worker and
writes the best feasible trial as a recipe revision; :mod:`.outputs` and :mod:`.plots` leave
trials.csv, summary.json, the plots and report.md in the archive.
"""

from model_optimizer.search.tune.evaluate import TrialResult
from model_optimizer.search.tune.loop import TuneOutcome, resume_tune, start_tune
from model_optimizer.search.tune.space import ParamSpec, TuneConfig, TuneFlags

__all__ = ["ParamSpec", "TrialResult", "TuneConfig", "TuneFlags", "TuneOutcome", "resume_tune",
           "start_tune"]
