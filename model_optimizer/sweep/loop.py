"""The sweep loop: ask the strategy for a value, measure it, repeat; then choose, confirm the
choice with a sustained run and write it as a recipe revision.

The archive, ``state.json``, the clock, the time budget and sealing are the search core's
(:class:`~model_optimizer.search.session.SearchSession`); this module keeps the sweep's own
state (config, history, decisions) and its steps. Because the strategy is a pure function of
the history, a resumed sweep ends exactly where an uninterrupted one would have.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from model_optimizer.archive import STATUS_OK, failed_status, utc_now
from model_optimizer.errors import UsageError
from model_optimizer.events import (
    KneeFitted,
    ProbeFailed,
    SweepConfirm,
    SweepConfirmed,
    SweepSkipped,
    SweepStep,
    SweepStepDone,
    eta_s,
)
from model_optimizer.measure import Measurement, step_figures, variant
from model_optimizer.plan import load_model_config
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.runner import run_recipe, tied_concurrency
from model_optimizer.search.knobs import engine_overrides
from model_optimizer.search.revision import default_model_config, write_validated_revision
from model_optimizer.search.scan import confirmation_problems
from model_optimizer.search.scanrules import MAX_SCAN_SERVERS, lowered_ceiling
from model_optimizer.search.session import (
    EventCallback,
    SearchSession,
    load_summary,
    read_search_archive,
)
from model_optimizer.sweep.decide import (
    PHASE_REMEASURE,
    choice_resolved,
    cut_range_note,
    decision_record,
    distinct,
    noise_note,
    quality_failures,
    remeasure_plan,
    shortfall,
)
from model_optimizer.sweep.fit import Knee
from model_optimizer.sweep.fitscan import (
    NARROW_ROUNDS,
    cut_knee,
    fitted_choice,
    knee_record,
    knee_so_far,
    next_step,
    windows_of,
)
from model_optimizer.sweep.flags import SweepFlags, build_config, sweep_objective
from model_optimizer.sweep.model import round_value
from model_optimizer.sweep.outputs import write_outputs
from model_optimizer.sweep.probe import SCANNING, ProbeServer, resolve_strategy, scan_ceiling
from model_optimizer.sweep.state import SweepOutcome, SweepState, point_of
from model_optimizer.sweep.strategy import (
    Point,
    choose,
    fallback_candidates,
    next_value,
)

KIND = "sweep"
#: measures one value: (the recipe with the value applied, the value) -> its measurement
Measure = Callable[[LoadedRecipe, object], Measurement]


class SweepRunner:
    """Runs one sweep (new or resumed) in its search session."""

    def __init__(self, session: SearchSession, measure: Measure | None = None,
                 engine_factory=None):
        self.session, self.engine_factory = session, engine_factory
        self.injected, self.probe = measure is not None, None
        self.loaded = session.loaded
        self.state: SweepState = session.state  # type: ignore[assignment]
        self.emit = session.emit
        self.measure = measure or self._measure_for_real
        self.settings = self.loaded.spec.sweep

    def run(self) -> SweepOutcome:
        """Search, choose, confirm, write; archive as it goes. Re-raises KeyboardInterrupt."""
        return self.session.run(self._search_and_choose, self._finish, self._interrupted)

    def _search_and_choose(self) -> SweepOutcome:
        if self.state.strategy in SCANNING and not self.injected:
            self._probe_scan()
        else:
            self._search()
            self._remeasure()
        if self.state.strategy == "probe-fit" and self.state.knee is not None:
            return self._fitted_outcome()
        return self._choose_and_confirm()

    def _fitted_outcome(self) -> SweepOutcome:
        """The fitted knee, confirmed; ``--strict`` refuses a knee that is not resolved."""
        knee = Knee(**{**self.state.knee, "band": tuple(self.state.knee["band"])})
        self.emit(KneeFitted(knee.verdict(), knee.resolved))
        if not knee.resolved and self.state.strict:
            archive = self.session.archive
            return SweepOutcome(failed_status("not_resolved"), archive.path, archive.id,
                                None, f"{knee.verdict()}; --strict: nothing written")
        return self._choose_and_confirm()

    def _probe_scan(self) -> None:
        """Search and re-measure on one live server at the ceiling (``sweep/probe.py``); a
        ceiling that fails to start for memory is lowered once, any other failure (or a
        second one) relaunches per value."""
        while not self.state.scan_finished:
            probe = ProbeServer(self.loaded, self.session.steps_dir, int(self.state.config.max),
                                self.state.objective, self.session.archive.id, self.emit,
                                self.engine_factory)
            with probe:
                self.state.server_launches += 1
                self.session.save()
                if probe.started:
                    self.probe = probe
                    self._search()
                    self._remeasure()
                    self.state.scan_finished = True
                    self.session.save()
            self.probe = None
            if not probe.started and not self._lower_ceiling(probe):
                return self._relaunch_instead(probe)

    def _lower_ceiling(self, probe: ProbeServer) -> bool:
        """After the scan server failed to start: lower the ceiling for one more scan server
        when the failure was for memory (``lowered_ceiling``); False when it cannot."""
        failure = probe.outcome.failure if probe.outcome else None
        config = self.state.config
        lowered = lowered_ceiling(failure.kind if failure else None, probe.ceiling,
                                  int(round_value(config, config.start))) \
            if self.state.server_launches < MAX_SCAN_SERVERS else None
        if lowered is None:
            return False
        self.state.ceiling_failed, config.max = probe.ceiling, lowered
        reason = (f"the scan server at max_num_seqs={probe.ceiling} failed to start "
                  f"({failure.kind}): the ceiling is lowered to {lowered}, and a choice at "
                  f"{lowered} is not resolved (the range above it is not seen)")
        self._record_decision(None, None, reason, "memory")
        self.emit(ProbeFailed(reason))
        self.session.save()
        return True

    def _relaunch_instead(self, probe: ProbeServer) -> None:
        """The scan server did not start: one launch per value instead."""
        failure = probe.outcome.failure if probe.outcome else None
        self.state.strategy = "relaunch"
        self.state.strategy_reason = (f"the probe-scan server at max_num_seqs="
                                      f"{probe.ceiling} failed to start "
                                      f"({failure.kind if failure else 'unknown'}), so "
                                      "every value is launched")
        self.emit(ProbeFailed(self.state.strategy_reason))
        self._search()
        self._remeasure()

    def _remeasure(self) -> None:
        """Measure the top candidates again, interleaved (A B A B), one pair at a time, until
        the choice's margin is shown or the budget is spent (``sweep/decide.py``)."""
        config = self.state.config
        if config.categorical or self.state.strategy == "probe-fit":
            return
        while plan := remeasure_plan(config.plateau_threshold, self.state.history,
                                     self.settings.remeasure_rounds):
            used = sum(point.launches for point in self.state.history)
            if (config.max_launches is not None and used >= config.max_launches) \
                    or self.session.out_of_time(self.state.budget):
                self._record_decision(None, PHASE_REMEASURE, f"re-measurement stopped by the "
                                      f"budget ({used} launches, "
                                      f"{self.session.elapsed() / 60:.1f} min used)", "budget")
                return
            partner = next((v for v in plan if v != plan[0]), None)
            if partner is None:  # the last window of a round: its partner was measured last
                partner = next((p.value for p in reversed(self.state.history)
                                if p.phase == PHASE_REMEASURE and p.value != plan[0]), None)
            reason = (f"re-measure {plan[0]}"
                      f"{f' (interleaved with {partner})' if partner is not None else ''} "
                      "before choosing the knee: a slow minute hits both")
            self._record_decision(plan[0], PHASE_REMEASURE, reason, None)
            self._emit_step(plan[0], PHASE_REMEASURE, reason)
            self._measure_step(plan[0], PHASE_REMEASURE)

    def _finish(self, outcome: SweepOutcome) -> tuple[str, dict]:
        write_outputs(self.session.archive, self.loaded, self.state, outcome.chosen,
                      outcome.reason, written=outcome.written)
        return outcome.status, {"chosen": outcome.chosen.value if outcome.chosen else None,
                                "written": str(outcome.written) if outcome.written else None}

    def _interrupted(self) -> None:
        write_outputs(self.session.archive, self.loaded, self.state, None, "interrupted")

    # ----- the search -------------------------------------------------------------------
    def _search(self) -> None:
        if any(point.phase == PHASE_REMEASURE for point in self.state.history):
            return  # resumed after the search had finished
        if self.state.strategy == "probe-fit":
            return self._fit_search()
        while True:
            decision = next_value(self.state.config, self.state.history)
            out_of_time = self.session.out_of_time(self.state.budget)
            if decision.value is None or out_of_time:
                reason = decision.reason if decision.value is None else (
                    f"time budget of {self.state.budget} min spent")
                self._record_decision(None, decision.phase, reason, decision.stop_rule
                                      or "budget")
                return
            self._record_decision(decision.value, decision.phase, decision.reason,
                                  decision.stop_rule)
            self._emit_step(decision.value, decision.phase, decision.reason)
            self._measure_step(decision.value, decision.phase)

    def _fit_search(self) -> None:
        """The fitted-knee scan (``sweep/fitscan.py``) until the knee is found."""
        config, minutes = self.state.config, (self.loaded.spec.workload.duration_s or 20) / 60
        while (step := next_step(self.state.history, int(round_value(config, config.start)),
                                 int(config.max), config.plateau_threshold,
                                 rounds=NARROW_ROUNDS if self.settings.remeasure_rounds
                                 is None else self.settings.remeasure_rounds + 1,
                                 window_minutes=minutes)).value is not None:
            if self.session.out_of_time(self.state.budget):
                break
            reason = f"{step.phase} level {step.value} (every window feeds the fitted curve)"
            self._record_decision(step.value, step.phase, reason, None)
            self._emit_step(step.value, step.phase, reason)
            self._measure_step(step.value, step.phase)
        found = step.knee if step.value is None else knee_so_far(
            self.state.history, int(round_value(config, config.start)), int(config.max),
            config.plateau_threshold, window_minutes=minutes)   # the budget stopped it
        knee = cut_knee(found, windows_of(self.state.history, minutes),
                        self.state.ceiling_failed, config.plateau_threshold) if found else None
        self.state.knee = knee.to_dict() if knee else None
        self._record_decision(None, None, knee.verdict() if knee else
                              "too few acceptable windows to fit a curve", None)

    def _measure_step(self, value, phase: str) -> None:
        if self.probe is not None:  # a level on the live scan server
            self.session.sample_load()
            point, figures = self.probe.measure(value, phase)
        else:
            measured = self.measure(self.step_recipe(value), value)
            if measured.status == "skipped":
                self.emit(SweepSkipped(value, measured.reason))
            point, figures = point_of(value, phase, measured), measured.figures
        self.state.figures[str(point.value)] = figures
        self.state.step_figures.append(figures)
        self.state.history.append(point)
        self.session.save()
        self.emit(SweepStepDone(point.value, point.status, point.metric, point.failure_kind,
                                point.half_width))

    def _emit_step(self, value, phase: str | None, reason: str) -> None:
        """The ``step`` event; categorical values give the total and an ETA."""
        done = len(self.state.history)
        total = len(self.state.config.values) if self.state.config.categorical else None
        self.emit(SweepStep(done + 1, value, phase, reason, done, total,
                            eta_s(self.session.elapsed(), done, total)))

    def _record_decision(self, value, phase, reason: str, stop_rule) -> None:
        self.state.decisions.append({"value": value, "phase": phase, "reason": reason,
                                     "stop_rule": stop_rule, "at": utc_now()})

    def step_recipe(self, value) -> LoadedRecipe:
        """The recipe with the swept value applied (a tied concurrency follows max_num_seqs
        in the runner)."""
        return variant(self.loaded, engine_overrides({self.state.config.param: value}))

    def _measure_for_real(self, step: LoadedRecipe, value) -> Measurement:
        self.session.sample_load()  # here, not in _measure_step: an injected measure is a test's
        return self.session.measure(step, repeats=self.settings.repeats,
                                    objective=self.state.objective, labels={"value": value})

    # ----- choice, confirmation, output --------------------------------------------------
    def _choose_and_confirm(self) -> SweepOutcome:
        cfg, history = self.state.config, self.state.history
        archive = self.session.archive
        chosen, reason = fitted_choice(self.state.knee, history) if self.state.knee \
            else choose(cfg, history)
        if quality_failures(self.state.figures):
            reason = f"{reason}; {quality_failures(self.state.figures)}"
        if self.state.knee is None:
            reason += cut_range_note(cfg, history, self.state.ceiling_failed)
        rejected: set = {c["value"] for c in self.state.confirmations if not c["ok"]}
        candidates: list[Point] = []
        if chosen is not None:
            if chosen.value not in rejected:
                candidates.append(chosen)
            candidates += fallback_candidates(cfg, history, rejected | {chosen.value})
        for candidate in distinct(candidates):
            confirmation = self._confirm(candidate)
            if confirmation["ok"]:
                figures = confirmation.get("figures") or self.state.figures.get(
                    str(candidate.value), {})
                reason += self._confirmed_note(chosen, candidate, confirmation)
                resolved = choice_resolved(cfg, history, self.state.knee,
                                           self.state.ceiling_failed, self.state.confirmations,
                                           self.state.objective)
                if self.state.strict and not resolved:
                    return SweepOutcome(failed_status("not_resolved"), archive.path,
                                        archive.id, None, f"{reason}; --strict: nothing written")
                return SweepOutcome(STATUS_OK, archive.path, archive.id, candidate, reason,
                                    self._write(candidate, figures, resolved), figures,
                                    resolved)
            rejected.add(candidate.value)
        why = reason if chosen is None else f"{reason}; every candidate failed confirmation"
        return SweepOutcome(failed_status("no_acceptable_value"), archive.path, archive.id,
                            None, why)

    def _confirmed_note(self, chosen: Point, candidate: Point, confirmation: dict) -> str:
        """What the reason adds once ``candidate`` passed: a fallback, and NOT RESOLVED."""
        note = "" if candidate is chosen else (f"; {chosen.value} was rejected by the "
                                               f"sustained run, {candidate.value} confirmed "
                                               "instead")
        if confirmation.get("shortfall"):
            return f"{note}; NOT RESOLVED: {confirmation['shortfall']}"
        return note + ("" if self.state.knee else noise_note(
            self.state.config, self.state.history, self.state.confirmations,
            self.state.objective, self.session.elapsed() / max(len(self.state.history), 1)))

    def _confirm(self, candidate: Point) -> dict:
        done = [c for c in self.state.confirmations if c["value"] == candidate.value]
        if done:
            return done[-1]
        seconds = self.settings.confirm_duration_s
        if not seconds:
            return {"value": candidate.value, "ok": True, "skipped": True}
        self.emit(SweepConfirm(candidate.value, seconds))
        self.session.sample_load()
        outcome = run_recipe(self.step_recipe(candidate.value), self.session.steps_dir,
                             on_event=self.emit,
                             workload_override={"duration_s": seconds, "num_requests": None},
                             engine_factory=self.engine_factory,
                             archive_extra={KIND: self.session.archive.id, "confirm": True,
                                            "value": candidate.value})
        problems, figures = confirmation_problems(outcome, self.loaded.spec), \
            step_figures(outcome)
        result = {"value": candidate.value, "ok": not problems, "problems": problems,
                  "run_id": outcome.run_id, "figures": figures,
                  "shortfall": "" if problems else shortfall(candidate, figures,
                                                             self.state.objective)}
        self.state.confirmations.append(result)
        self.session.save()
        self.emit(SweepConfirmed(**result))
        return result

    def _write(self, chosen: Point, figures: dict, resolved: bool) -> Path:
        quality = self.state.figures.get(str(chosen.value), {}).get("quality")
        return write_validated_revision(
            self.session.archive, self.loaded, {("engine", self.state.config.param):
                                                chosen.value},
            figures, by=KIND, output=Path(self.state.output), quality=quality,
            knee=knee_record(self.state.knee), resolved=resolved,
            load_average=load_summary(self.state.load_samples),
            decision=None if self.state.knee else decision_record(
                self.state.config, self.state.history, self.state.confirmations, resolved,
                self.state.objective))


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
    if strategy in SCANNING:
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
