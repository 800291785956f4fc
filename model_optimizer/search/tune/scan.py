"""Scanning trials: when ``max_num_seqs`` is in the tune space, one trial is one launch.

A scanning trial launches the combination of the OTHER knobs that optuna asked for once, at
the largest max_num_seqs level that fits (the space's top, lowered to the planner's largest
value without preemption), and measures the levels of the space on that live server (the
search core's :class:`~model_optimizer.search.core.scan.ScanServer`: one steady-state window per
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
one launch); added levels do not count (``search/tune/study.py``). A level already measured (a
resumed trial, or an earlier launch of the same combination) is not measured again.

The scan stops early at the memory ceiling (a level whose window saw preemptions or a full
KV cache, or the server's death: every higher level is infeasible) and, once the asked
level is measured, at a regression (a level whose interval lies wholly below the best
level's). A scan server that does not start for memory (``search/tune/ceiling.py``) lowers the
ceiling: the trial launches again at the lowered ceiling (at most
:data:`~model_optimizer.search.tune.ceiling.MAX_SCAN_LAUNCHES` launches, the last at the asked
level), later trials of the same other knobs start from the lowered ceiling, and a level
at or above a launch of theirs that did not fit is infeasible without a launch. A scan
server that does not start for another reason falls back to a launch of the asked
configuration alone. The chosen trial was measured on a server launched at another
max_num_seqs, so before the revision is written it is confirmed by a launch of its own
(``search/tune/confirm.py``).
"""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial, TrialState

from model_optimizer.errors import RecipeError, UsageError
from model_optimizer.events import LevelDone, ScanFailed, TuneScan
from model_optimizer.load.classes import figure
from model_optimizer.plan import PlanError, estimate
from model_optimizer.search.core.scan import ScanServer, closed_loop_problems
from model_optimizer.search.core.scan import level_failure as window_failure
from model_optimizer.search.core.scanrules import Reading
from model_optimizer.search.measure import Measurement, objective_half_width, step_figures
from model_optimizer.search.tune.ceiling import (
    LAUNCHES_ATTR,
    MAX_SCAN_LAUNCHES,
    SCANNED,
    KnownCeiling,
    Launch,
    known_ceiling,
)
from model_optimizer.search.tune.confirm import ConfirmVerdict, confirm_best
from model_optimizer.search.tune.evaluate import TrialResult, trial_verdict
from model_optimizer.search.tune.host import ScanHost
from model_optimizer.search.tune.space import ParamSpec, TuneConfig, trial_recipe
from model_optimizer.search.tune.trials import same_params


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
    return reading(current).below(reading(best))


def reading(result: TrialResult) -> Reading:
    """A measured result's objective and its interval."""
    return Reading.of(result.measurement.samples, result.measurement.half_width)


class TrialScanner:
    """Runs scanning trials and confirms the chosen one, for the tune behind ``host``."""

    def __init__(self, host: ScanHost):
        self.host = host
        self.spec = next(s for s in host.config.params if s.name == SCANNED)
        self._failure: TrialResult | None = None  # the level that ended the running scan

    # ----- one trial: one launch, every level --------------------------------------------
    def run(self, trial: optuna.Trial, params: dict) -> dict:
        """Launch (lowered while the launch does not fit), scan, tell every level; returns
        the asked trial's record."""
        host, asked = self.host, int(params[SCANNED])
        others = {k: v for k, v in params.items() if k != SCANNED}
        planner, why = self._ceiling(others, self._span()[1])
        known = known_ceiling(host.study.get_trials(deepcopy=False), others, SCANNED)
        launches: list[Launch] = []
        while not known.infeasible(asked):
            levels = self._levels(planner, known, asked, len(launches) + 1 >= MAX_SCAN_LAUNCHES)
            if not levels:
                return host.tell(trial, params, _skipped(why or "no level fits"),
                                 _launch_attrs(trial, launches))
            try:
                server = trial_recipe(host.loaded, {**others, SCANNED: max(levels)},
                                      "tune scan server")
            except RecipeError as exc:
                reason = "; ".join(d.message for d in exc.diagnostics)
                return host.tell(trial, params, _skipped(reason, "rules"),
                                 _launch_attrs(trial, launches))
            scan = {"ceiling": max(levels), "levels": levels}
            trial.set_user_attr("launches", len(launches) + 1)  # counted if interrupted
            live, mine, windows = self._serve(trial, others, asked, levels, server)
            launches.append(Launch(max(levels), live.started, _failure_kind(live)))
            trial.set_user_attr(LAUNCHES_ATTR, [launch.to_dict() for launch in launches])
            known = known.with_launch(launches[-1], trial.number)
            if live.started:
                scan.update({"server_run": live.outcome.run_id, "windows": windows})
                return self._tell_scanned(trial, params, mine, scan, launches, why)
            host.emit(ScanFailed(trial.number, live.ceiling, launches[-1].failure or "unknown",
                                 launches[-1].memory))
            if not launches[-1].memory:  # not memory: the asked configuration alone
                return self._relaunch(trial, params, scan, launches)
        return host.tell(trial, params, _failed(known.failure or "oom",
                                                known.why_infeasible(asked)),
                         _launch_attrs(trial, launches))

    def _span(self) -> tuple[int, int]:
        """The lowest and highest max_num_seqs of the space."""
        if self.spec.kind == "categorical":
            values = [int(c) for c in self.spec.choices]
            return min(values), max(values)
        return max(1, int(self.spec.low)), int(self.spec.high)

    def _levels(self, planner: int, known: KnownCeiling, asked: int, last: bool) -> list[int]:
        """The levels of the next launch: the space's under the planner's ceiling, the extra
        ones also under the known memory ceiling (all but the asked one on the last
        launch), none at or above a launch of these knobs that did not fit."""
        bound = asked if last else known.bound(planner, self._span()[0])
        return [v for v in scan_levels(self.spec, planner, asked)
                if (v <= bound or v == asked) and not known.infeasible(v)]

    def _serve(self, trial, others: dict, asked: int, levels: list[int],
               server) -> tuple[ScanServer, TrialResult | None, int]:
        """One scan server at ``max(levels)``: ``(server, the asked level's result, windows
        measured)``; nothing measured when it did not start."""
        host, ceiling = self.host, max(levels)
        host.emit(TuneScan(trial.number, ceiling, levels))
        extra = {"tune": host.tune_id, "study": host.study_name, "trial": trial.number}
        mine, windows = None, 0
        with host.open_server(server, host.session.steps_dir, ceiling, host.emit,
                              {**extra, "scan_server": True,
                               "params": {**others, SCANNED: ceiling}}) as live:
            if live.started:
                mine, windows = self._scan(trial, others, asked, levels, live, extra)
        return live, mine, windows

    def _tell_scanned(self, trial, params: dict, mine: TrialResult | None, scan: dict,
                      launches: list[Launch], why: str | None) -> dict:
        asked = int(params[SCANNED])
        if mine is None:
            mine = _skipped(why or f"max_num_seqs {asked} is above the scan's ceiling")
            if asked <= scan["ceiling"]:
                mine = self._above_failure(asked)
        measured_here = int(mine.status != "skipped" and bool(mine.measurement.run_ids))
        return self.host.tell(trial, params, mine, {
            **_launch_attrs(trial, launches), "windows": measured_here, "scan": scan})

    def _ceiling(self, others: dict, top: int) -> tuple[int, str | None]:
        """The largest max_num_seqs the planner lets run without preemption (``top`` when
        it cannot tell), and its reason when lower."""
        model_config = self.host.session.model_config
        if model_config is None:
            return top, None
        try:
            step = trial_recipe(self.host.loaded, {**others, SCANNED: top}, "tune ceiling")
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

    def _relaunch(self, trial, params: dict, scan: dict, launches: list[Launch]) -> dict:
        scan["failed"] = launches[-1].failure or "unknown"
        step = trial_recipe(self.host.loaded, params, "tune relaunch")
        result = self.host.measure(step, trial.number, params)
        count = len(launches) + len(result.measurement.run_ids)
        if result.measurement.run_ids:
            launches = [*launches, Launch(int(params[SCANNED]), result.status == "ok",
                                          result.measurement.failure_kind)]
        return self.host.tell(trial, params, result, {
            **_launch_attrs(trial, launches), "launches": count,
            "windows": len(result.measurement.samples), "scan": scan})

    # ----- the chosen trial: a launch of its own -----------------------------------------
    def confirm(self, ranked: list[FrozenTrial]) -> ConfirmVerdict:
        """The best feasible trials confirmed by launches of their own
        (``search/tune/confirm.py``)."""
        return confirm_best(self.host, ranked)


def _launch_attrs(trial, launches: list[Launch]) -> dict:
    """The attributes a trial's launches leave: their count and record, the launch its
    levels belong to."""
    attrs = {"launches": len(launches), LAUNCHES_ATTR: [x.to_dict() for x in launches]}
    return {**attrs, "launch": trial.number} if launches else attrs


def _failure_kind(live: ScanServer) -> str | None:
    failure = live.outcome.failure if live.outcome is not None else None
    return failure.kind if failure is not None else None


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
