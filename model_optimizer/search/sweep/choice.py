"""The end of every sweep strategy: choose, confirm the choice with a sustained run (a
rejected one hands over to the next candidate), and write it as the recipe's next revision.
"""

from __future__ import annotations

from pathlib import Path

from model_optimizer.archive import STATUS_OK, failed_status
from model_optimizer.events import SweepConfirm, SweepConfirmed
from model_optimizer.runner import run_recipe
from model_optimizer.search.core.revision import write_validated_revision
from model_optimizer.search.core.scan import confirmation_problems
from model_optimizer.search.core.session import load_summary
from model_optimizer.search.measure import step_figures
from model_optimizer.search.sweep.decide import (
    choice_resolved,
    cut_range_note,
    decision_record,
    distinct,
    noise_note,
    quality_failures,
    shortfall,
)
from model_optimizer.search.sweep.fitscan import fitted_choice, knee_record
from model_optimizer.search.sweep.state import SweepOutcome
from model_optimizer.search.sweep.steps import SweepSteps
from model_optimizer.search.sweep.strategy import Point, choose, fallback_candidates

KIND = "sweep"


def choose_and_confirm(steps: SweepSteps) -> SweepOutcome:
    """The choice (the fitted knee's, else the strategy's), the first candidate that passes
    its sustained run written; a failed outcome when none does."""
    state, archive = steps.state, steps.session.archive
    cfg, history = state.config, state.history
    chosen, reason = fitted_choice(state.knee, history) if state.knee else choose(cfg, history)
    if quality_failures(state.figures):
        reason = f"{reason}; {quality_failures(state.figures)}"
    if state.knee is None:
        reason += cut_range_note(cfg, history, state.ceiling_failed)
    rejected: set = {c["value"] for c in state.confirmations if not c["ok"]}
    candidates: list[Point] = []
    if chosen is not None:
        if chosen.value not in rejected:
            candidates.append(chosen)
        candidates += fallback_candidates(cfg, history, rejected | {chosen.value})
    for candidate in distinct(candidates):
        confirmation = confirm(steps, candidate)
        if confirmation["ok"]:
            return _confirmed(steps, chosen, candidate, confirmation, reason)
        rejected.add(candidate.value)
    why = reason if chosen is None else f"{reason}; every candidate failed confirmation"
    return SweepOutcome(failed_status("no_acceptable_value"), archive.path, archive.id,
                        None, why)


def _confirmed(steps: SweepSteps, chosen: Point, candidate: Point, confirmation: dict,
               reason: str) -> SweepOutcome:
    """The outcome once ``candidate`` passed: written, unless ``--strict`` refuses it."""
    state, archive = steps.state, steps.session.archive
    figures = confirmation.get("figures") or state.figures.get(str(candidate.value), {})
    reason += _confirmed_note(steps, chosen, candidate, confirmation)
    resolved = choice_resolved(state.config, state.history, state.knee, state.ceiling_failed,
                               state.confirmations, state.objective)
    if state.strict and not resolved:
        return SweepOutcome(failed_status("not_resolved"), archive.path,
                            archive.id, None, f"{reason}; --strict: nothing written")
    return SweepOutcome(STATUS_OK, archive.path, archive.id, candidate, reason,
                        _write(steps, candidate, figures, resolved), figures, resolved)


def _confirmed_note(steps: SweepSteps, chosen: Point, candidate: Point,
                    confirmation: dict) -> str:
    """What the reason adds once ``candidate`` passed: a fallback, and NOT RESOLVED."""
    state = steps.state
    note = "" if candidate is chosen else (f"; {chosen.value} was rejected by the "
                                           f"sustained run, {candidate.value} confirmed "
                                           "instead")
    if confirmation.get("shortfall"):
        return f"{note}; NOT RESOLVED: {confirmation['shortfall']}"
    return note + ("" if state.knee else noise_note(
        state.config, state.history, state.confirmations, state.objective,
        steps.session.elapsed() / max(len(state.history), 1)))


def confirm(steps: SweepSteps, candidate: Point) -> dict:
    """``candidate``'s sustained run (once: a resumed sweep reads the one it has), judged
    by the recipe's SLOs and the shortfall rule."""
    state, session = steps.state, steps.session
    done = [c for c in state.confirmations if c["value"] == candidate.value]
    if done:
        return done[-1]
    seconds = steps.settings.confirm_duration_s
    if not seconds:
        return {"value": candidate.value, "ok": True, "skipped": True}
    steps.emit(SweepConfirm(candidate.value, seconds))
    session.sample_load()
    outcome = run_recipe(steps.step_recipe(candidate.value), session.steps_dir,
                         on_event=steps.emit,
                         workload_override={"duration_s": seconds, "num_requests": None},
                         engine_factory=steps.engine_factory,
                         archive_extra={KIND: session.archive.id, "confirm": True,
                                        "value": candidate.value})
    problems, figures = confirmation_problems(outcome, steps.loaded.spec), step_figures(outcome)
    result = {"value": candidate.value, "ok": not problems, "problems": problems,
              "run_id": outcome.run_id, "figures": figures,
              "shortfall": "" if problems else shortfall(candidate, figures, state.objective)}
    state.confirmations.append(result)
    session.save()
    steps.emit(SweepConfirmed(**result))
    return result


def _write(steps: SweepSteps, chosen: Point, figures: dict, resolved: bool) -> Path:
    state = steps.state
    quality = state.figures.get(str(chosen.value), {}).get("quality")
    return write_validated_revision(
        steps.session.archive, steps.loaded, {("engine", state.config.param): chosen.value},
        figures, by=KIND, output=Path(state.output), quality=quality,
        knee=knee_record(state.knee), resolved=resolved,
        load_average=load_summary(state.load_samples),
        decision=None if state.knee else decision_record(
            state.config, state.history, state.confirmations, resolved, state.objective))
