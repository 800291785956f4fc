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

This worker's own record (inputs, the trials it ran, elapsed time) is rewritten atomically to
``<tune>/state.json`` after each trial; the study itself lives in the storage. On Ctrl-C the
running trial is failed as interrupted and its configuration enqueued again, so
``mopt tune --resume`` continues the study without rerunning any finished trial.
"""

from __future__ import annotations

import json
import os
import socket
import time
import warnings
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from model_optimizer.archive import (
    STATUS_INTERRUPTED,
    STATUS_OK,
    RunArchive,
    failed_status,
    utc_now,
)
from model_optimizer.archive.index import STEPS_DIR
from model_optimizer.errors import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SLO_FAILED,
    RecipeError,
    UsageError,
)
from model_optimizer.measure import Measurement, measure_configuration, variant
from model_optimizer.plan import PlanError, estimate, load_model_config
from model_optimizer.quality.search_gate import SearchGate
from model_optimizer.recipe import LoadedRecipe, load_recipe_text
from model_optimizer.search import default_model_config, hardware_label, write_validated_revision
from model_optimizer.signals import interrupts_deferred
from model_optimizer.tune.evaluate import (
    TrialResult,
    constraint_values,
    objective_values,
    read_trial_result,
    slo_bounds,
)
from model_optimizer.tune.outputs import best_trial, write_outputs, write_trials_csv
from model_optimizer.tune.space import (
    TuneConfig,
    overrides_for,
    planner_seed,
    recipe_seed,
    same_value,
)
from model_optimizer.tune.study import (
    Heartbeat,
    beyond_budget,
    budget_used,
    fail_stale_trials,
    make_sampler,
    make_storage,
    open_study,
    redact_url,
    requeue,
    sqlite_url,
    study_budget,
)

EventCallback = Callable[[str, dict], None]
Measure = Callable[[LoadedRecipe, int, dict], TrialResult]
#: trial run archives go where the run index and manifests look for nested runs
TRIALS_DIR = STEPS_DIR
STUDY_FILE = "study.db"
#: user attributes a trial that repeats a finished configuration copies from it
COPIED_ATTRS = ("status", "failure_kind", "reason", "log_excerpt", "figures", "samples",
                "slo_met", "feasible", "hardware", "machine_measured")


@dataclass
class TuneState:
    """This worker's record, for ``--resume``: its inputs and the trials it ran."""

    config: dict
    recipe_file: str
    overrides: list[str]
    output: str
    model_config: str | None
    storage: str                  # the storage URL, password hidden
    local_study: bool             # the study is <archive>/study.db
    study_name: str
    explicit_n_trials: int | None = None
    machine: str = field(default_factory=socket.gethostname)
    trials_here: list[int] = field(default_factory=list)
    stop: dict | None = None
    started_at: str = field(default_factory=utc_now)
    elapsed_s: float = 0.0
    quality_baseline: str | None = None   # the quality gate's baseline eval (trials/<id>)

    def to_dict(self) -> dict:
        """JSON form for state.json."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TuneState:
        """Inverse of :meth:`to_dict`."""
        return cls(**data)


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
                "running_elsewhere": self.running_elsewhere, "counts": self.counts}


class TuneRunner:
    """Runs one worker of a study (new, joined or resumed) into its archive folder."""

    def __init__(self, loaded: LoadedRecipe, archive: RunArchive, state: TuneState,
                 storage_url: str, on_event: EventCallback | None = None,
                 measure: Measure | None = None):
        self.loaded = loaded
        self.archive = archive
        self.state = state
        self.emit = on_event or (lambda phase, data: None)
        self.measure = measure or self._measure_for_real
        self.config = TuneConfig.from_dict(state.config)
        self.bounds = slo_bounds(loaded.resolved)
        self.model_config = (load_model_config(state.model_config)
                             if state.model_config else None)
        self.hardware = hardware_label()
        self.storage = make_storage(storage_url)
        self.study, created = open_study(self.storage, state.study_name, self.config,
                                         optuna.samplers.RandomSampler())
        self.n_trials = study_budget(self.study, self.config, state.explicit_n_trials)
        self.study.sampler = make_sampler(self.config, self._session_seed())
        if created:
            self._enqueue_seeds()
        self.quality = SearchGate(loaded, archive.path / TRIALS_DIR,
                                  baseline_run=state.quality_baseline, on_event=self.emit)
        self._clock = time.monotonic()

    # ----- setup ------------------------------------------------------------------------
    def _session_seed(self) -> int:
        """The recipe's seed, moved on by the trials already in the study (a resumed search
        does not replay its draws) and, on shared storage, by this worker's identity."""
        worker = "" if self.state.local_study else f"{self.state.machine}:{os.getpid()}"
        existing = len(self.study.get_trials(deepcopy=False))
        return (self.config.seed + 7919 * existing + zlib.crc32(worker.encode())) % 2**31

    def _enqueue_seeds(self) -> None:
        """The recipe's values, the planner's suggestion, and (grid) every combination."""
        engine = self.loaded.resolved["engine"]
        seeds: list[tuple[str, dict]] = []
        current = recipe_seed(self.config, engine)
        if current:
            seeds.append(("recipe", current))
        suggestion = self._planner_suggestion(engine)
        if suggestion:
            seeds.append(("planner", suggestion))
        if self.config.sampler == "grid":  # seeds that are grid points first, then the rest
            grid = self.config.grid()
            seeds = [(tag, p) for tag, p in seeds if any(_same_params(p, g) for g in grid)]
            seeds += [("grid", combo) for combo in grid]
        unique: list[tuple[str, dict]] = []
        for tag, params in seeds:
            if not any(_same_params(params, other) for _, other in unique):
                unique.append((tag, params))
        for tag, params in unique[: self.n_trials]:
            self.study.enqueue_trial(params, user_attrs={"seed": tag})
        self.emit("seeded", {"seeds": [{"seed": t, "params": p} for t, p in unique[:3]],
                             "count": min(len(unique), self.n_trials)})

    def _planner_suggestion(self, engine: dict) -> dict | None:
        if self.model_config is None:
            return None
        try:
            report = estimate(self.loaded.resolved, self.model_config)
        except PlanError:
            return None
        return planner_seed(self.config, engine, report.max_seqs_no_preemption)

    # ----- the loop ---------------------------------------------------------------------
    def run(self) -> TuneOutcome:
        """Trials until a budget ends, then choose and write; archive as it goes.

        Re-raises KeyboardInterrupt after archiving the state as interrupted.
        """
        try:
            self._search()
            outcome = self._finish()
        except KeyboardInterrupt:
            with interrupts_deferred():
                self._save()
                self.archive.set_status(STATUS_INTERRUPTED, phase="interrupted",
                                        resume=f"mopt tune --resume {self.archive.path}")
                write_outputs(self.archive, self.loaded, self.state, self.config, self.study,
                              None, "interrupted", None)
                self.archive.close()  # seal: manifest + run index
            raise
        self.archive.set_status(outcome.status, phase="finished", finished_at=utc_now(),
                                best=outcome.best, written=outcome.to_dict()["written"])
        self.archive.close()  # seal: manifest + run index
        return outcome

    def _search(self) -> None:
        while True:
            fail_stale_trials(self.study)
            reason = self._stop_reason(self.study.get_trials(deepcopy=False))
            if reason is not None:
                self.state.stop = {"reason": reason, "at": utc_now()}
                self._save()
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
        waiting = any(t.state == TrialState.WAITING for t in trials)
        if budget_used(trials) >= self.n_trials and not waiting:
            return f"the study's budget of {self.n_trials} trials is used"
        limit = self.config.max_minutes
        if limit and self._elapsed() > limit * 60:
            return f"this worker's time budget of {limit} min is spent"
        size = self.config.space_size()
        if size is not None and not waiting:
            tried = _distinct_configurations(trials)
            if tried >= size:
                return f"every one of the {size} configurations of the space was tried"
        return None

    def _elapsed(self) -> float:
        return self.state.elapsed_s + (time.monotonic() - self._clock)

    def _save(self) -> None:
        self.state.elapsed_s = self._elapsed()
        self._clock = time.monotonic()
        self.archive.write_json("state.json", self.state.to_dict())

    # ----- one trial --------------------------------------------------------------------
    def _run_trial(self, trial: optuna.Trial) -> None:
        params = {spec.name: spec.suggest(trial) for spec in self.config.params}
        for key, value in {"machine": self.state.machine, "pid": os.getpid(),
                           "worker": self.archive.id, "started_at": utc_now()}.items():
            trial.set_user_attr(key, value)
        self.emit("trial", {"number": trial.number, "params": params,
                            "seed": trial.user_attrs.get("seed"),
                            "finished": _finished_count(self.study.get_trials(deepcopy=False)),
                            "budget": self.n_trials})
        twin = self._finished_twin(params, trial.number)
        try:
            if twin is not None:
                record = self._copy_twin(trial, twin)
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
        self._save()
        write_trials_csv(self.archive, self.config, self.study.get_trials(deepcopy=False))
        self.emit("trial_done", record)

    def _finished_twin(self, params: dict, number: int) -> FrozenTrial | None:
        for other in self.study.get_trials(deepcopy=False,
                                           states=(TrialState.COMPLETE, TrialState.PRUNED)):
            if other.number != number and "status" in other.user_attrs \
                    and _same_params(other.params, params):
                return other
        return None

    def _copy_twin(self, trial: optuna.Trial, twin: FrozenTrial) -> dict:
        attrs = {k: twin.user_attrs[k] for k in COPIED_ATTRS if k in twin.user_attrs}
        attrs.update({"duplicate_of": twin.number, "run_ids": [], "launches": 0})
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        for key, value in twin.constraints.items():
            trial.set_constraint(key, value)
        if twin.state == TrialState.PRUNED:
            self.study.tell(trial, state=TrialState.PRUNED)
        else:
            self.study.tell(trial, list(twin.values))
        return {"number": trial.number, "params": dict(twin.params), **attrs,
                "values": twin.values}

    def _measure_and_tell(self, trial: optuna.Trial, params: dict) -> dict:
        try:
            step = variant(self.loaded, overrides_for(params))
        except RecipeError as exc:
            reason = "; ".join(d.message for d in exc.diagnostics)
            result = TrialResult(Measurement("skipped", failure_kind="rules", reason=reason))
        else:
            with Heartbeat(self.storage, trial._trial_id):  # optuna has no public trial id
                result = self.measure(step, trial.number, params)
        return self._tell(trial, params, result)

    def _measure_for_real(self, step: LoadedRecipe, number: int, params: dict) -> TrialResult:
        trials_dir = self.archive.path / TRIALS_DIR
        measured = measure_configuration(
            step, trials_dir, repeats=self.config.repeats, objective=self.config.metric,
            model_config=self.model_config, on_event=self.emit,
            archive_extra={"tune": self.archive.id, "study": self.state.study_name,
                           "trial": number, "params": params},
            quality_gate=self._quality_gate if self.quality.enabled else None)
        return read_trial_result(measured, trials_dir)

    def _quality_gate(self, step: LoadedRecipe):
        """The quality gate's verdict on a trial (a failure makes it infeasible)."""
        verdict = self.quality.check(step)
        if self.quality.baseline_run != self.state.quality_baseline:
            self.state.quality_baseline = self.quality.baseline_run
            self._save()
        return verdict

    def _tell(self, trial: optuna.Trial, params: dict, result: TrialResult) -> dict:
        measured = result.measurement
        constraints = constraint_values(result, self.bounds)
        values = objective_values(result, self.config)
        attrs = {"status": measured.status, "failure_kind": measured.failure_kind,
                 "reason": measured.reason, "log_excerpt": result.log_excerpt(),
                 "run_ids": measured.run_ids, "launches": len(measured.run_ids),
                 "figures": measured.figures, "samples": measured.samples,
                 "slo_met": measured.slo_met,
                 "feasible": measured.status == "ok" and all(c <= 0 for c in
                                                             constraints.values()),
                 "hardware": self.hardware, "machine_measured": self.state.machine,
                 "finished_at": utc_now()}
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        for key, value in constraints.items():  # before tell: the sampler reads them
            trial.set_constraint(key, value)
        if values is None:
            self.study.tell(trial, state=TrialState.PRUNED)
        else:
            self.study.tell(trial, values)
        return {"number": trial.number, "params": params, **attrs, "values": values,
                "constraints": constraints}

    def _fail_interrupted(self, trial: optuna.Trial) -> None:
        trial.set_user_attr("interrupted", True)
        self.study.tell(trial, state=TrialState.FAIL)
        frozen = next(t for t in self.study.get_trials(deepcopy=False)
                      if t.number == trial.number)
        if frozen.params:
            requeue(self.study, frozen, "interrupted")

    # ----- the end ----------------------------------------------------------------------
    def _finish(self) -> TuneOutcome:
        trials = self.study.get_trials(deepcopy=False)
        running = sum(1 for t in trials if t.state == TrialState.RUNNING)
        best = best_trial(trials, self.config)
        stop = (self.state.stop or {}).get("reason", "")
        outcome = TuneOutcome(STATUS_OK, self.archive.path, self.archive.id,
                              self.state.study_name, running_elsewhere=running,
                              counts=_counts(trials))
        if running:
            outcome.reason = (f"{stop}; {running} trial(s) still running on other workers: "
                              "the worker that finishes last writes the recipe")
        elif best is None:
            outcome.status = failed_status("no_feasible_trial")
            outcome.reason = f"{stop}; no trial was feasible ({_describe_counts(trials)})"
        else:
            outcome.written = self._write(best)
            outcome.reason = f"{stop}; best feasible: trial {best.number} {dict(best.params)}"
        outcome.best = _trial_summary(best) if best is not None else None
        write_outputs(self.archive, self.loaded, self.state, self.config, self.study, best,
                      outcome.reason, outcome.written)
        self.emit("finished", outcome.to_dict())
        return outcome

    def _write(self, best: FrozenTrial) -> Path:
        changes = {("engine", name): value for name, value in best.params.items()}
        figures = best.user_attrs.get("figures") or {}
        return write_validated_revision(
            self.archive, self.loaded, changes, figures, by="tune",
            output=Path(self.state.output), hardware=best.user_attrs.get("hardware"),
            quality=figures.get("quality"))


# ----- helpers -------------------------------------------------------------------------------
def _same_params(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)


def _finished_count(trials: list[FrozenTrial]) -> int:
    return sum(1 for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED))


def _distinct_configurations(trials: list[FrozenTrial]) -> int:
    seen: list[dict] = []
    for trial in trials:
        if trial.state in (TrialState.COMPLETE, TrialState.PRUNED) \
                and not any(_same_params(trial.params, other) for other in seen):
            seen.append(trial.params)
    return len(seen)


def _counts(trials: list[FrozenTrial]) -> dict:
    counts: dict[str, int] = {}
    for trial in trials:
        key = trial.state.name.lower()
        counts[key] = counts.get(key, 0) + 1
    counts["launches"] = sum(t.user_attrs.get("launches", 0) for t in trials)
    return counts


def _describe_counts(trials: list[FrozenTrial]) -> str:
    kinds: dict[str, int] = {}
    for trial in trials:
        if "status" not in trial.user_attrs:
            continue
        attrs = trial.user_attrs
        key = ("infeasible (SLO)" if attrs["status"] == "ok"
               else f"{attrs['status']}: {attrs.get('failure_kind')}")
        kinds[key] = kinds.get(key, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "no trial finished"


def _trial_summary(trial: FrozenTrial) -> dict:
    attrs = trial.user_attrs
    return {"number": trial.number, "params": dict(trial.params), "values": trial.values,
            "figures": attrs.get("figures"), "machine": attrs.get("machine"),
            "run_ids": attrs.get("run_ids"), "duplicate_of": attrs.get("duplicate_of")}


# ----- entry points --------------------------------------------------------------------------
def start_tune(loaded: LoadedRecipe, runs_base: str | Path, *, flags: dict | None = None,
               storage: str | None = None, study_name: str | None = None,
               output: Path | None = None, model_config: Path | None = None,
               on_event: EventCallback | None = None, measure: Measure | None = None,
               ) -> TuneOutcome:
    """Begin a tune of ``loaded`` (or join the shared study ``study_name``) and run it."""
    flags = flags or {}
    config = TuneConfig.from_recipe(loaded.resolved["tune"], **flags)
    if config.sampler == "grid":
        config.grid()  # a usage error now rather than after the archive exists
    if storage and not study_name:
        raise UsageError("--storage shares a study between workers: name it with "
                         "--study-name (the same on every worker)")
    archive = RunArchive.create(runs_base, f"{loaded.name}-tune", kind="tune")
    storage_url = storage or sqlite_url(archive.path / STUDY_FILE)
    state = TuneState(
        config=config.to_dict(), recipe_file=str(loaded.path), overrides=list(loaded.overrides),
        output=str(output or loaded.path), model_config=default_model_config(loaded,
                                                                              model_config),
        storage=redact_url(storage_url), local_study=storage is None,
        study_name=study_name or archive.id,
        explicit_n_trials=flags.get("n_trials"))
    archive.write_text("recipe.given.yaml", loaded.source_text)
    archive.write_json("state.json", state.to_dict())
    archive.set_status("running", study=state.study_name, storage=state.storage)
    if on_event:
        on_event("archive", {"run_id": archive.id, "path": str(archive.path),
                             "study": state.study_name, "storage": state.storage})
    return TuneRunner(loaded, archive, state, storage_url, on_event, measure).run()


def resume_tune(tune_dir: Path, *, storage: str | None = None, n_trials: int | None = None,
                on_event: EventCallback | None = None,
                measure: Measure | None = None) -> TuneOutcome:
    """Continue an interrupted tune from its archive: finished trials are never rerun.

    ``storage`` is needed again when the study's URL carries a password (archives keep it
    hidden); ``n_trials`` raises the study's budget (also to extend a finished tune).
    """
    try:
        state = TuneState.from_dict(json.loads((tune_dir / "state.json").read_text()))
        given = (tune_dir / "recipe.given.yaml").read_text()
        status = json.loads((tune_dir / "status.json").read_text())
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{tune_dir}: not a resumable tune archive ({exc}); give the folder "
                         "printed by the interrupted `mopt tune`") from None
    if status.get("status") == STATUS_OK and n_trials is None:
        raise UsageError(f"{tune_dir}: this tune already finished; give --n-trials N to "
                         "extend its study to N trials")
    storage_url = _resume_storage(tune_dir, state, storage)
    if n_trials is not None:
        state.explicit_n_trials = n_trials
    loaded = load_recipe_text(given, state.recipe_file, state.overrides)
    loaded.path = Path(state.recipe_file)
    archive = RunArchive(tune_dir, tune_dir.name)
    archive.set_status("running", phase="resumed", resumed_at=utc_now())
    if on_event:
        on_event("archive", {"run_id": archive.id, "path": str(archive.path),
                             "study": state.study_name, "storage": state.storage,
                             "resumed": len(state.trials_here)})
    return TuneRunner(loaded, archive, state, storage_url, on_event, measure).run()


def _resume_storage(tune_dir: Path, state: TuneState, given: str | None) -> str:
    if state.local_study:
        return sqlite_url(tune_dir / STUDY_FILE)
    if given is None:
        if "***" in state.storage:
            raise UsageError(f"the study is in {state.storage}; its password is not archived: "
                             "give the URL again with --storage (or $MOPT_TUNE_STORAGE)")
        return state.storage
    if redact_url(given) != state.storage:
        raise UsageError(f"--storage {redact_url(given)} is not the study's storage "
                         f"{state.storage}")
    return given
