"""The tune loop: one worker's trials on an optuna study, then the best feasible trial written
as a recipe revision.

Each iteration, until the study's trial budget is used (all workers together), this worker's
time budget is spent, or every configuration of a finite space has been tried:

1. ask optuna for a trial: an enqueued one first (the seeds, the grid, a retried one), else
   the sampler's choice;
2. a configuration already measured in the study is not launched again: its result is copied
   (``duplicate_of``);
3. a configuration that breaks the recipe's rules, or that the planner says cannot run, is
   PRUNED with the reason, without a launch;
4. otherwise it is measured by the shared ``measure_configuration`` (archived runs under
   ``<tune>/steps/``, where the run index looks, as for a sweep's steps) and told to optuna
   as a COMPLETE trial with its objective values and its SLO constraints; a failed launch
   too, with its failure class and log excerpt.

The archive, ``state.json`` (this worker's record), the clock and sealing are the search
core's (``search.session``); the study lives in the storage. On Ctrl-C the running trial
fails as interrupted and is enqueued again: ``--resume`` reruns no finished trial."""

from __future__ import annotations

import os
import socket
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from model_optimizer import events
from model_optimizer.archive import STATUS_INTERRUPTED, STATUS_OK, failed_status, utc_now
from model_optimizer.archive.names import STUDY_FILE
from model_optimizer.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SLO_FAILED,
    RecipeError,
    UsageError,
)
from model_optimizer.plan import PlanError, estimate
from model_optimizer.quality.config import quality_config
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.search.core.revision import default_model_config, write_validated_revision
from model_optimizer.search.core.session import (
    SearchSession,
    SearchState,
    load_summary,
    read_search_archive,
)
from model_optimizer.search.measure import Measurement
from model_optimizer.search.tune.evaluate import (
    TrialResult,
    read_trial_result,
    slo_bounds,
    trial_verdict,
)
from model_optimizer.search.tune.host import ScanHost
from model_optimizer.search.tune.outputs import (
    best_trial,
    ranked_feasible,
    write_outputs,
    write_trials_csv,
)
from model_optimizer.search.tune.scan import TrialScanner, resolve_scan, scan_grid
from model_optimizer.search.tune.space import (
    TuneConfig,
    TuneFlags,
    planner_seed,
    recipe_seed,
    trial_recipe,
)
from model_optimizer.search.tune.study import (
    Heartbeat,
    beyond_budget,
    budget_used,
    fail_stale_trials,
    make_sampler,
    make_storage,
    open_study,
    redact_url,
    requeue,
    resume_storage,
    sqlite_url,
    study_budget,
)
from model_optimizer.search.tune.trials import (
    copy_twin,
    describe_outcomes,
    distinct_configurations,
    finished_count,
    finished_twin,
    same_params,
    state_counts,
    tell_verdict,
    trial_summary,
    unique_seeds,
)
from model_optimizer.signals import interrupts_deferred
from model_optimizer.telemetry import this_hardware

KIND = "tune"
Measure = Callable[[LoadedRecipe, int, dict], TrialResult]


@dataclass(kw_only=True)
class TuneState(SearchState):
    """This worker's record, for ``--resume``: its inputs and the trials it ran."""

    config: dict
    storage: str                  # the storage URL, password hidden
    local_study: bool             # the study is <archive>/study.db
    study_name: str
    explicit_n_trials: int | None = None
    machine: str = field(default_factory=socket.gethostname)
    trials_here: list[int] = field(default_factory=list)
    stop: dict | None = None
    scan: bool = False            # each trial scans max_num_seqs on one launch (scan.py)
    scan_reason: str = ""
    confirmations: list[dict] = field(default_factory=list)  # scan: the winner's own launch
    confirmation: dict | None = None  # scan: what the confirmation chose (confirm.py)


@dataclass
class TuneOutcome:
    """How this worker's tune ended."""

    status: str
    archive: Path
    tune_id: str
    study_name: str
    reason: str = ""
    best: dict | None = None
    written: Path | None = None
    running_elsewhere: int = 0
    counts: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # why the choice is not resolved

    @property
    def resolved(self) -> bool:
        """The tune's verdict on the choice it wrote: no warning against it."""
        return not self.warnings

    @property
    def exit_code(self) -> int:
        """0 a revision was written (or other workers still run and the last one writes it);
        4 no feasible trial; 130 interrupted."""
        if self.status == STATUS_INTERRUPTED:
            return EXIT_INTERRUPTED
        return EXIT_OK if self.written or self.running_elsewhere else EXIT_SLO_FAILED

    def to_dict(self) -> dict:
        """JSON-ready summary."""
        return {"status": self.status, "tune_id": self.tune_id, "archive": str(self.archive),
                "study_name": self.study_name, "reason": self.reason, "best": self.best,
                "written": str(self.written) if self.written else None,
                "running_elsewhere": self.running_elsewhere, "counts": self.counts,
                "resolved": self.resolved, "warnings": self.warnings}


class TuneRunner:
    """Runs one worker of a study (new, joined or resumed) in its search session."""

    def __init__(self, session: SearchSession, storage_url: str,
                 measure: Measure | None = None):
        self.session = session
        self.loaded = session.loaded
        self.archive = session.archive
        self.state: TuneState = session.state  # type: ignore[assignment]
        self.emit = session.emit
        self.measure = measure or self._measure_for_real
        self.config = TuneConfig.from_dict(self.state.config)
        self.bounds = slo_bounds(self.loaded.resolved)
        self.hardware = this_hardware()
        self.storage = make_storage(storage_url)
        self.study, created = open_study(self.storage, self.state.study_name, self.config,
                                         optuna.samplers.RandomSampler())
        self.n_trials = study_budget(self.study, self.config, self.state.explicit_n_trials)
        self.study.sampler = make_sampler(self.config, self._session_seed())
        self._best: FrozenTrial | None = None
        self.scanner = TrialScanner(ScanHost(  # a small interface, not this runner
            self.loaded, self.config, self.study, self.bounds, self.hardware, self.state.machine,
            self.archive.id, self.state.study_name, session, self.state.confirmations,
            self.emit, self.measure, self.tell)) if self.state.scan else None
        if created:
            self._enqueue_seeds()

    # ----- setup ------------------------------------------------------------------------
    def _session_seed(self) -> int:
        """The recipe's seed, moved on by the trials already in the study (a resumed search
        does not replay its draws) and, on shared storage, by this worker's identity."""
        worker = "" if self.state.local_study else f"{self.state.machine}:{os.getpid()}"
        existing = len(self.study.get_trials(deepcopy=False))
        return (self.config.seed + 7919 * existing + zlib.crc32(worker.encode())) % 2**31

    def _enqueue_seeds(self) -> None:
        engine = self.loaded.resolved["engine"]
        unique = enqueue_seeds(self.study, self.config, engine, self.n_trials,
                               self._planner_suggestion(engine), self.scanner is not None)
        self.emit(events.TuneSeeded([{"seed": t, "params": p} for t, p in unique[:3]],
                                    min(len(unique), self.n_trials)))

    def _planner_suggestion(self, engine: dict) -> dict | None:
        if self.session.model_config is None:
            return None
        try:
            report = estimate(self.loaded.resolved, self.session.model_config)
        except PlanError:
            return None
        return planner_seed(self.config, engine, report.max_seqs_no_preemption)

    # ----- the loop ---------------------------------------------------------------------
    def run(self) -> TuneOutcome:
        """Trials until a budget ends, then choose and write; archive as it goes.

        Re-raises KeyboardInterrupt after archiving the state as interrupted.
        """
        return self.session.run(self._search_and_choose, self._finish, self._interrupted)

    def _search_and_choose(self) -> TuneOutcome:
        self._search()
        return self._choose()

    def _search(self) -> None:
        while True:
            fail_stale_trials(self.study)
            reason = self._stop_reason(self.study.get_trials(deepcopy=False))
            if reason is not None:
                self.state.stop = {"reason": reason, "at": utc_now()}
                self.session.save()
                return
            with warnings.catch_warnings():  # optuna: heartbeats are meant for optimize()
                warnings.simplefilter("ignore", UserWarning)
                trial = self.study.ask()
            if beyond_budget(self.study.get_trials(deepcopy=False), trial.number,
                             self.n_trials):
                trial.set_user_attr("beyond_budget", True)  # another worker took the last one
                self.study.tell(trial, state=TrialState.FAIL)
                continue
            self._run_trial(trial)

    def _stop_reason(self, trials: list[FrozenTrial]) -> str | None:
        limit = self.config.max_minutes
        if self.session.out_of_time(limit):
            return f"this worker's time budget of {limit} min is spent"
        return stop_reason(trials, self.n_trials, self.config)

    # ----- one trial --------------------------------------------------------------------
    def _run_trial(self, trial: optuna.Trial) -> None:
        params = {spec.name: spec.suggest(trial) for spec in self.config.params}
        for key, value in {"machine": self.state.machine, "pid": os.getpid(),
                           "worker": self.archive.id, "started_at": utc_now()}.items():
            trial.set_user_attr(key, value)
        done = finished_count(self.study.get_trials(deepcopy=False))
        here = len(self.state.trials_here)
        self.emit(events.TuneTrial(trial.number, params, trial.user_attrs.get("seed"), done,
                                   self.n_trials, events.eta_s(self.session.elapsed(), here,
                                                               here + self.n_trials - done)))
        twin = finished_twin(self.study, params, trial.number)
        try:
            if twin is not None:
                record = copy_twin(self.study, trial, twin)
            else:
                record = self._measure_and_tell(trial, params)
        except KeyboardInterrupt:
            with interrupts_deferred():
                self._fail_interrupted(trial)
            raise
        except Exception as exc:
            trial.set_user_attr("error", f"{type(exc).__name__}: {exc}"[:500])
            self.study.tell(trial, state=TrialState.FAIL)
            raise
        self.state.trials_here.append(trial.number)
        self.session.save()
        write_trials_csv(self.archive, self.config, self.study.get_trials(deepcopy=False))
        self.emit(events.TuneTrialDone(record))

    def _measure_and_tell(self, trial: optuna.Trial, params: dict) -> dict:
        self.session.sample_load()
        if self.scanner is not None:
            with Heartbeat(self.storage, trial._trial_id):
                return self.scanner.run(trial, params)
        try:
            step = trial_recipe(self.loaded, params)
        except RecipeError as exc:
            reason = "; ".join(d.message for d in exc.diagnostics)
            result = TrialResult(Measurement("skipped", failure_kind="rules", reason=reason))
        else:
            with Heartbeat(self.storage, trial._trial_id):  # optuna has no public trial id
                result = self.measure(step, trial.number, params)
        return self.tell(trial, params, result)

    def _measure_for_real(self, step: LoadedRecipe, number: int, params: dict) -> TrialResult:
        measured = self.session.measure(
            step, repeats=self.config.repeats, objective=self.config.metric,
            labels={"study": self.state.study_name, "trial": number, "params": params})
        return read_trial_result(measured, self.session.steps_dir)

    def tell(self, trial: optuna.Trial, params: dict, result: TrialResult,
             extra: dict | None = None) -> dict:
        """Record ``result`` on ``trial`` (attributes, constraints) and tell the study."""
        verdict = trial_verdict(result, self.bounds, self.config, self.hardware,
                                self.state.machine)
        return tell_verdict(self.study, trial, params, verdict, extra)

    def _fail_interrupted(self, trial: optuna.Trial) -> None:
        trial.set_user_attr("interrupted", True)
        self.study.tell(trial, state=TrialState.FAIL)
        frozen = next(t for t in self.study.get_trials(deepcopy=False)
                      if t.number == trial.number)
        if frozen.params:
            requeue(self.study, frozen, "interrupted")

    # ----- the end ----------------------------------------------------------------------
    def _choose(self) -> TuneOutcome:
        trials = self.study.get_trials(deepcopy=False)
        running = sum(1 for t in trials if t.state == TrialState.RUNNING)
        best = self._best = best_trial(trials, self.config)
        stop, figures, warnings = (self.state.stop or {}).get("reason", ""), None, []
        if best is not None and self.scanner is not None and not running:
            verdict = self.scanner.confirm(ranked_feasible(trials, self.config))
            best, figures, warnings = verdict.trial, verdict.figures, list(verdict.warnings)
            self.state.confirmation = verdict.to_dict()
            self._best, stop = best, "; ".join(x for x in (stop, verdict.note()) if x)
        outcome = TuneOutcome(STATUS_OK, self.archive.path, self.archive.id,
                              self.state.study_name, running_elsewhere=running,
                              counts=state_counts(trials), warnings=warnings)
        if running:
            outcome.reason = (f"{stop}; {running} trial(s) still running on other workers: "
                              "the worker that finishes last writes the recipe")
        elif best is None:
            outcome.status = failed_status("no_feasible_trial")
            outcome.reason = f"{stop}; no trial was feasible ({describe_outcomes(trials)})"
        else:
            outcome.written = self._write(best, figures, outcome.resolved)
            outcome.reason = f"{stop}; best feasible: trial {best.number} {dict(best.params)}"
        outcome.best = trial_summary(best) if best is not None else None
        return outcome

    def _finish(self, outcome: TuneOutcome) -> tuple[str, dict]:
        write_outputs(self.archive, self.loaded, self.state, self.config, self.study,
                      self._best, outcome.reason, outcome.written)
        self.emit(events.TuneFinished(outcome.to_dict()))
        return outcome.status, {"best": outcome.best, "written": outcome.to_dict()["written"]}

    def _interrupted(self) -> None:
        write_outputs(self.archive, self.loaded, self.state, self.config, self.study,
                      None, "interrupted", None)

    def _write(self, best: FrozenTrial, figures: dict | None, resolved: bool) -> Path:
        changes = {("engine", name): value for name, value in best.params.items()}
        figures = figures or best.user_attrs.get("figures") or {}
        return write_validated_revision(
            self.archive, self.loaded, changes, figures, by=KIND,
            output=Path(self.state.output), hardware=best.user_attrs.get("hardware"),
            quality=(best.user_attrs.get("figures") or {}).get("quality"), resolved=resolved,
            load_average=load_summary(self.state.load_samples))


def enqueue_seeds(study: optuna.Study, config: TuneConfig, engine: dict, n_trials: int,
                  suggestion: dict | None, scanning: bool) -> list[tuple[str, dict]]:
    """Enqueue the recipe's values, the planner's ``suggestion`` and (grid) every combination
    (when ``scanning``: each combination of the other knobs once); returns them all."""
    seeds: list[tuple[str, dict]] = []
    current = recipe_seed(config, engine)
    if current:
        seeds.append(("recipe", current))
    if suggestion:
        seeds.append(("planner", suggestion))
    if config.sampler == "grid":  # seeds that are grid points first, then the rest
        grid = scan_grid(config.grid()) if scanning else config.grid()
        seeds = [(tag, p) for tag, p in seeds if any(same_params(p, g) for g in grid)]
        seeds += [("grid", combo) for combo in grid]
    unique = unique_seeds(seeds)
    for tag, params in unique[:n_trials]:
        study.enqueue_trial(params, user_attrs={"seed": tag})
    return unique


def stop_reason(trials: list[FrozenTrial], n_trials: int, config: TuneConfig) -> str | None:
    """Why no further trial starts (the time budget aside): the study's budget is used, or
    every configuration of a finite space was tried; None to go on."""
    waiting = any(t.state == TrialState.WAITING for t in trials)
    if budget_used(trials) >= n_trials and not waiting:
        return f"the study's budget of {n_trials} trials is used"
    size = config.space_size()
    if size is not None and not waiting and distinct_configurations(trials) >= size:
        return f"every one of the {size} configurations of the space was tried"
    return None


# ----- entry points --------------------------------------------------------------------------
def start_tune(loaded: LoadedRecipe, runs_base: str | Path, *, flags: TuneFlags | None = None,
               storage: str | None = None, study_name: str | None = None,
               output: Path | None = None, model_config: Path | None = None,
               on_event: events.EventCallback | None = None, measure: Measure | None = None,
               ) -> TuneOutcome:
    """Begin a tune of ``loaded`` (or join the shared study ``study_name``) and run it."""
    flags = flags or TuneFlags()
    config = TuneConfig.from_recipe(loaded.resolved["tune"], flags)
    if config.sampler == "grid":
        config.grid()  # a usage error now rather than after the archive exists
    if storage and not study_name:
        raise UsageError("--storage shares a study between workers: name it with "
                         "--study-name (the same on every worker)")
    urls: dict[str, str] = {}
    requested = "relaunch" if measure is not None else config.strategy  # tests inject one
    scan, why = resolve_scan(requested, config, loaded.resolved,
                             quality_config(loaded.resolved, loaded.base_dir).enabled)

    def state_for(archive) -> TuneState:
        urls["storage"] = storage or sqlite_url(archive.path / STUDY_FILE)
        return TuneState(
            config=config.to_dict(), recipe_file=str(loaded.path),
            overrides=list(loaded.overrides), output=str(output or loaded.path),
            model_config=default_model_config(loaded, model_config),
            storage=redact_url(urls["storage"]), local_study=storage is None,
            study_name=study_name or archive.id, explicit_n_trials=flags.n_trials,
            scan=scan, scan_reason=why)

    session = SearchSession.create(KIND, loaded, runs_base, state_for, on_event)
    state: TuneState = session.state  # type: ignore[assignment]
    session.archive.set_status("running", study=state.study_name, storage=state.storage)
    session.announce(study=state.study_name, storage=state.storage, strategy=why)
    return TuneRunner(session, urls["storage"], measure).run()


def resume_tune(tune_dir: Path, *, storage: str | None = None, n_trials: int | None = None,
                on_event: events.EventCallback | None = None,
                measure: Measure | None = None) -> TuneOutcome:
    """Continue an interrupted tune from its archive: finished trials are never rerun.

    ``storage`` is needed again when the study's URL carries a password (archives keep it
    hidden); ``n_trials`` raises the study's budget (also to extend a finished tune).
    """
    state, finished = read_search_archive(KIND, tune_dir, TuneState)
    if finished and n_trials is None:
        raise UsageError(f"{tune_dir}: this tune already finished; give --n-trials N to "
                         "extend its study to N trials")
    storage_url = resume_storage(state.storage,
                                 tune_dir / STUDY_FILE if state.local_study else None, storage)
    if n_trials is not None:
        state.explicit_n_trials = n_trials
    session = SearchSession.resume(KIND, tune_dir, state, on_event)
    session.announce(study=state.study_name, storage=state.storage,
                     resumed=len(state.trials_here))
    return TuneRunner(session, storage_url, measure).run()
