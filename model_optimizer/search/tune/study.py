"""The optuna side of ``mopt tune``: storage, study, sampler, the shared budget, heartbeats.

- **Storage.** By default ``sqlite:///<tune archive>/study.db``; ``--storage
  postgresql://...`` puts the study where several workers (one per machine) share it. Either
  is an optuna ``RDBStorage`` with heartbeats: every running trial's worker records one each
  ``HEARTBEAT_S``; a trial without one for ``GRACE_S`` (its worker died) is failed by the next
  worker that looks, and its configuration is enqueued again.
- **Study.** Created by exactly one worker (``create_study`` without ``load_if_exists`` fails
  for the others, who load it instead): the creator stores the space and the budget in the
  study's user attributes and enqueues the seed trials, so seeds are never enqueued twice.
  A worker whose recipe searches another space is refused.
- **Budget.** ``n_trials`` counts the trials of every worker: COMPLETE, PRUNED, RUNNING,
  WAITING, and FAIL caused by an error. A FAIL left by an interrupt or a dead worker does not
  count: its configuration is enqueued again (and that copy counts). When a tune scans
  max_num_seqs, each trial is at most one launch, and the levels it adds do not count.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path

import optuna
import sqlalchemy
from optuna.trial import FrozenTrial, TrialState

from model_optimizer import secrets
from model_optimizer.archive import utc_now
from model_optimizer.errors import UsageError
from model_optimizer.search.tune.space import TuneConfig

HEARTBEAT_S = 15
GRACE_S = 90
STUDY_ATTR = "mopt"
COUNTED_STATES = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.RUNNING,
                  TrialState.WAITING)

log = logging.getLogger(__name__)


def sqlite_url(path: Path) -> str:
    """The SQLAlchemy URL of a SQLite file."""
    return f"sqlite:///{Path(path).resolve()}"


def redact_url(url: str) -> str:
    """``url`` with its password and query values hidden (for archives and messages)."""
    return secrets.redact_url(url)


def requeue(study: optuna.Study, trial: FrozenTrial, why: str) -> None:
    """Enqueue ``trial``'s configuration again (it was interrupted or its worker died)."""
    attrs = {"retry_of": trial.number, "retry_reason": why}
    if "seed" in trial.user_attrs:
        attrs["seed"] = trial.user_attrs["seed"]
    study.enqueue_trial(dict(trial.params), user_attrs=attrs)


def _requeue_stale(study: optuna.Study, trial: FrozenTrial) -> None:
    requeue(study, trial, "its worker stopped sending heartbeats")


def make_storage(url: str, attempts: int = 5) -> optuna.storages.RDBStorage:
    """An RDB storage with heartbeats; a URL that cannot be used is a UsageError.

    Workers that start at once on a fresh database race to create optuna's tables; the
    loser's error is retried after a pause.
    """
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for attempt in range(attempts):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    url, heartbeat_interval=HEARTBEAT_S, grace_period=GRACE_S,
                    heartbeat_stale_trial_callback=_requeue_stale)
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError) as exc:
            if attempt + 1 == attempts:
                raise _storage_error(url, exc) from None
            time.sleep(1.0 + attempt)
        except (sqlalchemy.exc.SQLAlchemyError, ImportError, ValueError) as exc:
            raise _storage_error(url, exc) from None
    raise AssertionError("unreachable")


def _storage_error(url: str, exc: Exception) -> UsageError:
    hint = (" (install the driver: pip install 'model-optimizer[distributed]')"
            if isinstance(exc, ImportError) or "psycopg" in str(exc) else "")
    return UsageError(f"--storage {redact_url(url)}: cannot open the study storage: "
                      f"{str(exc).splitlines()[0]}{hint}")


def make_sampler(config: TuneConfig, seed: int) -> optuna.samplers.BaseSampler:
    """TPE (which reads the trials' constraints), or random. The grid enqueues every trial."""
    if config.sampler != "tpe":
        return optuna.samplers.RandomSampler(seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            seed=seed, multivariate=True,
            n_startup_trials=max(2, min(10, config.n_trials // 3)))


def open_study(storage: optuna.storages.BaseStorage, name: str, config: TuneConfig,
               sampler: optuna.samplers.BaseSampler) -> tuple[optuna.Study, bool]:
    """Create the study, or join it; returns (study, created by this call)."""
    try:
        study = optuna.create_study(storage=storage, study_name=name, sampler=sampler,
                                    directions=config.directions)
    except optuna.exceptions.DuplicatedStudyError:
        study = optuna.load_study(study_name=name, storage=storage, sampler=sampler)
        _check_same_space(study, config)
        return study, False
    study.set_user_attr(STUDY_ATTR, {"space": config.fingerprint(), "n_trials": config.n_trials,
                                     "created_at": utc_now()})
    return study, True


def _check_same_space(study: optuna.Study, config: TuneConfig) -> None:
    stored = study.user_attrs.get(STUDY_ATTR, {}).get("space")
    if stored is not None and stored != config.fingerprint():
        raise UsageError(f"study '{study.study_name}' searches another space or objective "
                         f"({stored}); give this worker the same recipe tune section, or "
                         "another --study-name")
    if [d.name.lower() for d in study.directions] != config.directions:
        raise UsageError(f"study '{study.study_name}' has directions "
                         f"{[d.name.lower() for d in study.directions]}, not "
                         f"{config.directions}")


def study_budget(study: optuna.Study, config: TuneConfig, explicit: int | None) -> int:
    """The study's trial budget: --n-trials (stored for every worker), else the stored one."""
    data = dict(study.user_attrs.get(STUDY_ATTR) or {})
    if explicit is not None and data.get("n_trials") != explicit:
        data["n_trials"] = explicit
        study.set_user_attr(STUDY_ATTR, data)
    return int(data.get("n_trials") or config.n_trials)


def counts_against_budget(trial: FrozenTrial) -> bool:
    """True for trials that use the budget (see the module docstring)."""
    if trial.user_attrs.get("scan_level"):  # a level added by a scanning trial's launch
        return False
    if trial.state in COUNTED_STATES:
        return True
    return trial.state == TrialState.FAIL and "error" in trial.user_attrs


def budget_used(trials: Sequence[FrozenTrial]) -> int:
    """How many trials of the budget are used (or taken) in the whole study."""
    return sum(1 for trial in trials if counts_against_budget(trial))


def beyond_budget(trials: Sequence[FrozenTrial], number: int, n_trials: int) -> bool:
    """True when trial ``number`` came after the budget was taken (workers asking at once)."""
    earlier = sum(1 for t in trials if counts_against_budget(t) and t.number < number)
    return earlier >= n_trials


class Heartbeat:
    """Records the running trial's heartbeat in a background thread (a context manager)."""

    def __init__(self, storage: optuna.storages.BaseStorage, trial_id: int,
                 interval_s: float = HEARTBEAT_S):
        self.storage = storage
        self.trial_id = trial_id
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="mopt-heartbeat", daemon=True)

    def __enter__(self) -> Heartbeat:
        if isinstance(self.storage, optuna.storages.RDBStorage):
            self._record()
            self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _beat(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._record()

    def _record(self) -> None:
        try:
            self.storage.record_heartbeat(self.trial_id)
        except sqlalchemy.exc.SQLAlchemyError as exc:  # a hiccup must not end the trial
            log.warning("heartbeat of trial %s not recorded: %s", self.trial_id, exc)


def fail_stale_trials(study: optuna.Study) -> None:
    """Fail the trials of workers that died (and enqueue their configurations again)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


def resume_storage(archived: str, local_file: Path | None, given: str | None) -> str:
    """The storage URL a resumed worker opens: its own ``local_file`` (a study inside the
    archive), else ``given`` (needed when the archived URL hides a password), else the
    archived URL. A given URL must be the archived one."""
    if local_file is not None:
        return sqlite_url(local_file)
    if given is None:
        if "***" in archived:
            raise UsageError(f"the study is in {archived}; its password is not archived: "
                             "give the URL again with --storage (or $MOPT_TUNE_STORAGE)")
        return archived
    if redact_url(given) != archived:
        raise UsageError(f"--storage {redact_url(given)} is not the study's storage "
                         f"{archived}")
    return given
