"""Scanning trials: when ``max_num_seqs`` is in the tune space, one trial is one launch.

A scanning trial launches the combination of the OTHER knobs that optuna asked for once, at
the largest max_num_seqs level that fits (the space's top, lowered to the planner's largest
value without preemption), and measures the levels of the space on that live server (the
search core's :class:`~model_optimizer.search.scan.ScanServer`: one steady-state window per
level at that many requests in flight), lowest first.

How optuna sees it: **every scanned level is its own trial** of the same launch. The asked
trial is told the window of its own max_num_seqs; every other level is added with
``study.add_trial`` as a COMPLETE trial (parameters, objective, SLO constraints) carrying
``launch`` (the asked trial's number) and ``scan_level``. Why not one trial valued at the best
feasible level: the SLO constraints differ by level (latency grows with the batch), so TPE
learns where the feasible region ends only from each level's own constraints, and the
study's best trial, importances, Pareto front and the written revision then hold the
max_num_seqs that was actually measured. Why not ask-tell per level: optuna would choose
the levels one at a time, each a relaunch. The budget counts the asked trials (each at most
one launch); added levels do not count (``tune/study.py``). A level already measured (a
resumed trial, or an earlier launch of the same combination) is not measured again.

The scan stops early at the memory ceiling (a level whose window saw preemptions or a full
KV cache, or the server's death: every higher level is infeasible) and, once the asked
level is measured, at a regression (a level whose interval lies wholly below the best
level's). A server that does not start at the ceiling falls back to a launch of the asked
configuration alone. The chosen trial was measured on a server launched at another
max_num_seqs, so before the revision is written it is confirmed by a launch of its own
(the next best feasible candidate when that launch rejects it).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

import optuna
from optuna.trial import FrozenTrial, TrialState

from model_optimizer.archive import utc_now
from model_optimizer.errors import RecipeError, UsageError
from model_optimizer.events import (
    EventCallback,
    LevelDone,
    ScanFailed,
    TuneConfirm,
    TuneConfirmed,
    TuneScan,
)
from model_optimizer.load.classes import figure
from model_optimizer.measure import Measurement, objective_half_width, step_figures, variant
from model_optimizer.plan import PlanError, estimate
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.runner import RunOutcome, run_recipe
from model_optimizer.search.scan import ScanServer, closed_loop_problems, confirmation_problems
from model_optimizer.search.scan import level_failure as window_failure
from model_optimizer.search.session import SearchSession
from model_optimizer.tune.evaluate import TrialResult, trial_verdict
from model_optimizer.tune.space import ParamSpec, TuneConfig, overrides_for
from model_optimizer.tune.trials import same_params

SCANNED = "max_num_seqs"
CONFIRM_CANDIDATES = 3


def scan_problems(config: TuneConfig, recipe: dict, gated: bool) -> list[str]:
    """Why this tune cannot scan max_num_seqs on one server per trial (empty: it can)."""
    problems = []
    if SCANNED not in config.names:
        problems.append("max_num_seqs is not in tune.params")
    if config.repeats > 1:
        problems.append("tune.repeats > 1 asks for repeated launches of each trial")
    if gated:
        problems.append("the quality gate evaluates every configuration in its own launch")
    return problems + closed_loop_problems(recipe)


def resolve_scan(requested: str, config: TuneConfig, recipe: dict,
                 gated: bool) -> tuple[bool, str]:
    """``(scan, why)``: auto scans where valid; an explicit scan that is not valid is a usage
    error naming the reasons."""
    if requested == "relaunch":
        return False, "one launch per trial (asked for: --no-scan or tune.strategy relaunch)"
    problems = scan_problems(config, recipe, gated)
    if not problems:
        return True, ("one launch per trial: the other knobs at the largest max_num_seqs "
                      "that fits, every max_num_seqs level scanned on it")
    if requested == "scan":
        raise UsageError("--scan is not valid here: " + "; ".join(problems)
                         + ". Use --no-scan (tune.strategy: relaunch).")
    return False, "one launch per trial: scanning is not valid (" + "; ".join(problems) + ")"


def scan_levels(spec: ParamSpec, ceiling: int, asked: int) -> list[int]:
    """The levels one launch measures: the space's powers of two from ``low`` (categorical:
    its choices), its top, and the asked value, none above ``ceiling``, lowest first."""
    if spec.kind == "categorical":
        values = {int(c) for c in spec.choices}
    else:
        values, level = {int(spec.high)}, max(1, int(spec.low))
        while level <= spec.high:
            values.add(level)
            level *= 2
        values = {v for v in values if spec.contains(v)}
    return sorted(v for v in values | {int(asked)} if v <= ceiling)


def scan_grid(grid: list[dict]) -> list[dict]:
    """The grid's launches when scanning: each combination of the other knobs once, at its
    largest max_num_seqs (the scan measures the levels below it)."""
    top: dict[str, dict] = {}
    for combo in grid:
        key = repr(sorted((k, repr(v)) for k, v in combo.items() if k != SCANNED))
        if key not in top or combo[SCANNED] > top[key][SCANNED]:
            top[key] = combo
    return list(top.values())


def window_result(outcome, objective: str) -> TrialResult:
    """One level's window as a trial result (a failed window: the memory ceiling or a dead
    server, as data)."""
    metrics, peaks = outcome.metrics or {}, outcome.telemetry_peaks or {}
    figures, failure = step_figures(outcome), window_failure(outcome)
    if failure is not None:
        reason = ("the KV cache was full: the memory ceiling" if failure == "kv_cache_full"
                  else "the scan server failed during the window")
        return TrialResult(Measurement("failed", failure_kind=failure, reason=reason,
                                       run_ids=[outcome.run_id], figures=figures))
    half = objective_half_width(metrics, objective)
    measured = Measurement("ok", samples=[figure(metrics, objective) or 0.0],
                           slo_met=bool(metrics.get("slo_met")),
                           preemptions=peaks.get("preemptions") or 0,
                           run_ids=[outcome.run_id], figures=figures,
                           half_widths=[half] if half is not None else [])
    return TrialResult(measured, [metrics])


def regressed(best: TrialResult, current: TrialResult) -> bool:
    """True when ``current``'s interval lies wholly below ``best``'s (disjoint intervals)."""
    def bounds(result: TrialResult) -> tuple[float, float]:
        middle = statistics.median(result.measurement.samples)
        half = result.measurement.half_width or 0.0
        return middle - half, middle + half
    return bounds(current)[1] < bounds(best)[0]


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
    # the engine, replaceable by a simulated one (``simulate/tuning.py``): the scan server
    # (ScanServer's signature) and the confirming run (run_recipe's)
    open_server: Callable[..., ScanServer] = ScanServer
    run_one: Callable[..., RunOutcome] = run_recipe


class TrialScanner:
    """Runs scanning trials and confirms the chosen one, for the tune behind ``host``."""

    def __init__(self, host: ScanHost):
        self.host = host
        self.spec = next(s for s in host.config.params if s.name == SCANNED)
        self._failure: TrialResult | None = None  # the level that ended the running scan

    # ----- one trial: one launch, every level --------------------------------------------
    def run(self, trial: optuna.Trial, params: dict) -> dict:
        """Launch, scan, tell every level; returns the asked trial's record."""
        host, asked = self.host, int(params[SCANNED])
        others = {k: v for k, v in params.items() if k != SCANNED}
        top = max(int(c) for c in self.spec.choices) if self.spec.kind == "categorical" \
            else int(self.spec.high)
        ceiling, why = self._ceiling(others, top)
        levels = scan_levels(self.spec, ceiling, asked)
        if not levels:
            return host.tell(trial, params, _skipped(why or "no level fits"))
        try:
            server = variant(host.loaded, overrides_for({**others, SCANNED: max(levels)}))
        except RecipeError as exc:
            reason = "; ".join(d.message for d in exc.diagnostics)
            return host.tell(trial, params, _skipped(reason, "rules"))
        scan = {"ceiling": max(levels), "levels": levels}
        trial.set_user_attr("launches", 1)  # also counted if this trial is interrupted
        host.emit(TuneScan(trial.number, max(levels), levels))
        extra = {"tune": host.tune_id, "study": host.study_name,
                 "trial": trial.number}
        with host.open_server(server, host.session.steps_dir, max(levels), host.emit,
                              {**extra, "scan_server": True,
                               "params": {**others, SCANNED: max(levels)}}) as live:
            if live.started:
                scan["server_run"] = live.outcome.run_id
                mine, windows = self._scan(trial, others, asked, levels, live, extra)
        if not live.started:  # the ceiling did not start: the asked configuration alone
            return self._relaunch(trial, params, live, scan)
        if mine is None:
            mine = _skipped(why or f"max_num_seqs {asked} is above the scan's ceiling")
            if asked <= max(levels):
                mine = self._above_failure(asked)
        measured_here = int(mine.status != "skipped" and bool(mine.measurement.run_ids))
        return host.tell(trial, params, mine, {
            "launches": 1, "windows": measured_here, "launch": trial.number,
            "scan": {**scan, "windows": windows}})

    def _ceiling(self, others: dict, top: int) -> tuple[int, str | None]:
        """The largest max_num_seqs the planner lets run without preemption (``top`` when
        it cannot tell), and its reason when lower."""
        model_config = self.host.session.model_config
        if model_config is None:
            return top, None
        try:
            step = variant(self.host.loaded, overrides_for({**others, SCANNED: top}))
            limit = estimate(step.resolved, model_config).max_seqs_no_preemption
        except (RecipeError, PlanError):
            return top, None
        if limit >= top:
            return top, None
        return limit, (f"the planner says at most {limit} sequences run without preemption "
                       "with these knobs")

    def _scan(self, trial, others: dict, asked: int, levels: list[int], live: ScanServer,
              extra: dict) -> tuple[TrialResult | None, int]:
        host, windows = self.host, 0
        mine: TrialResult | None = None
        best: TrialResult | None = None
        self._failure = None
        for level in levels:
            params = {**others, SCANNED: level}
            result = None if level == asked else self._measured(params)
            if result is None:
                if not live.alive():
                    self._failure = _failed("engine_died", "the scan server died")
                    break
                outcome = live.window(level, {**extra, "level": level, "params": params})
                windows += 1
                result = window_result(outcome, host.config.metric)
                if level == asked:
                    mine = result
                else:
                    self._add_level(trial.number, params, result)
                host.emit(LevelDone(trial.number, level, result.status,
                                    result.measurement.failure_kind,
                                    (result.measurement.samples or [None])[0]))
            if result.status != "ok":
                self._failure = result
                break
            if best is not None and mine is not None and regressed(best, result):
                break
            if best is None or result.measurement.samples[0] > best.measurement.samples[0]:
                best = result
        return mine, windows

    def _above_failure(self, asked: int) -> TrialResult:
        failed = self._failure
        if failed is not None:  # every level above the memory ceiling is infeasible
            return _failed(failed.measurement.failure_kind or "engine_died",
                           f"max_num_seqs {asked} lies above a failed level of this scan "
                           f"({failed.measurement.reason})")
        return _skipped(f"not measured: the scan stopped at a regression below "
                        f"max_num_seqs {asked}", "regression")

    def _measured(self, params: dict) -> TrialResult | None:
        """A level a finished trial of the study already measured (not measured again)."""
        for other in self.host.study.get_trials(deepcopy=False, states=(
                TrialState.COMPLETE,)):
            attrs = other.user_attrs
            if "status" in attrs and same_params(other.params, params):
                return TrialResult(Measurement(attrs["status"], samples=attrs.get("samples")
                                               or [], failure_kind=attrs.get("failure_kind"),
                                               reason=attrs.get("reason")))
        return None

    def _add_level(self, launch: int, params: dict, result: TrialResult) -> None:
        host = self.host
        attrs, constraints, values = trial_verdict(result, host.bounds, host.config,
                                                   host.hardware, host.machine)
        attrs.update({"launches": 0, "windows": 1, "launch": launch, "scan_level": True,
                      "worker": host.tune_id, "machine": host.machine})
        distributions = {spec.name: _distribution(spec) for spec in host.config.params}
        host.study.add_trial(optuna.trial.create_trial(
            params=params, distributions=distributions, values=values, user_attrs=attrs,
            constraints=constraints,
            state=TrialState.COMPLETE if values is not None else TrialState.PRUNED))

    def _relaunch(self, trial, params: dict, live: ScanServer, scan: dict) -> dict:
        failure = live.outcome.failure
        scan["failed"] = failure.kind if failure else "unknown"
        self.host.emit(ScanFailed(trial.number, live.ceiling, scan["failed"]))
        step = variant(self.host.loaded, overrides_for(params))
        result = self.host.measure(step, trial.number, params)
        return self.host.tell(trial, params, result, {
            "launches": 1 + len(result.measurement.run_ids),
            "windows": len(result.measurement.samples),
            "launch": trial.number, "scan": scan})

    # ----- the chosen trial: a launch of its own -----------------------------------------
    def confirm(self, ranked: list[FrozenTrial]) -> tuple[FrozenTrial | None, dict, str]:
        """The first of the best feasible trials whose own launch passes: ``(trial, its
        figures, note)``; ``(None, {}, why)`` when every candidate is rejected."""
        host, notes = self.host, []
        for trial in ranked[:CONFIRM_CANDIDATES]:
            done = [c for c in host.confirmations
                    if same_params(c["params"], trial.params)]
            record = done[-1] if done else self._confirm_one(trial)
            if record["ok"]:
                return trial, record["figures"], "; ".join(notes)
            notes.append(f"trial {trial.number} {dict(trial.params)} rejected by its own "
                         f"launch ({'; '.join(record['problems'])})")
        return None, {}, "; ".join(notes) or "no feasible trial to confirm"

    def _confirm_one(self, trial: FrozenTrial) -> dict:
        host = self.host
        params = dict(trial.params)
        host.emit(TuneConfirm(trial.number, params))
        outcome = host.run_one(variant(host.loaded, overrides_for(params)),
                               host.session.steps_dir, on_event=host.emit,
                               archive_extra={"tune": host.tune_id, "confirm": True,
                                              "trial": trial.number, "params": params})
        problems = confirmation_problems(outcome, host.loaded.resolved)
        record = {"number": trial.number, "params": params, "ok": not problems,
                  "problems": problems, "run_id": outcome.run_id,
                  "figures": step_figures(outcome), "at": utc_now()}
        host.confirmations.append(record)
        host.session.save()
        host.emit(TuneConfirmed(**record))
        return record


def _skipped(reason: str, kind: str = "planner") -> TrialResult:
    return TrialResult(Measurement("skipped", failure_kind=kind, reason=reason,
                                   figures={"status": "skipped", "reason": reason}))


def _failed(kind: str, reason: str) -> TrialResult:
    return TrialResult(Measurement("failed", failure_kind=kind, reason=reason,
                                   figures={"status": "failed", "failure": kind}))


def _distribution(spec: ParamSpec) -> optuna.distributions.BaseDistribution:
    """The optuna distribution ``spec.suggest`` draws from (for ``add_trial``)."""
    if spec.kind == "categorical":
        return optuna.distributions.CategoricalDistribution(list(spec.choices))
    if spec.kind.startswith("int"):
        return optuna.distributions.IntDistribution(int(spec.low), int(spec.high),
                                                    log=spec.log, step=int(spec.step or 1))
    return optuna.distributions.FloatDistribution(spec.low, spec.high, log=spec.log,
                                                  step=spec.step)
