"""The end of a sweep: the choice, its sustained confirmation (falling back to lower values
when it fails), the verdict and the written revision.

A mixin of :class:`~model_optimizer.sweep.loop.SweepRunner`, kept apart so that the loop
holds the search and the settling, and this module what is done with their result. The
verdict is the settling's (``sweep/settle.py``): the written revision records
``validated.resolved``, the interval it rests on (``validated.decision``, with the budget
given and spent) and the machine's load during the search (``validated.load_average``);
``--strict`` writes nothing when the choice is not resolved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from model_optimizer.archive import STATUS_OK, failed_status
from model_optimizer.events import SweepConfirm, SweepConfirmed
from model_optimizer.measure import step_figures
from model_optimizer.runner import run_recipe
from model_optimizer.search.revision import write_validated_revision
from model_optimizer.search.scan import confirmation_problems
from model_optimizer.search.session import load_summary
from model_optimizer.sweep.decide import (
    choice_resolved,
    cut_range_note,
    distinct,
    quality_failures,
    shortfall,
    verdict_note,
)
from model_optimizer.sweep.fitscan import knee_record
from model_optimizer.sweep.settle import Settled, settled_choice
from model_optimizer.sweep.strategy import Point, fallback_candidates

KIND = "sweep"


class Finish:
    """The choice, confirmation and revision of a :class:`SweepRunner` (its attributes:
    ``state``, ``session``, ``loaded``, ``emit``, ``engine_factory``, and the methods
    ``settled``, ``step_recipe``, ``_confirm_seconds``, ``_budget``)."""

    def _choose_and_confirm(self):
        from model_optimizer.sweep.loop import SweepOutcome

        cfg, history, archive = self.state.config, self.state.history, self.session.archive
        settled = self.settled()
        chosen, reason = settled_choice(cfg, history, self.state.knee, settled)
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
            if not confirmation["ok"]:
                rejected.add(candidate.value)
                continue
            figures = confirmation.get("figures") or self.state.figures.get(
                str(candidate.value), {})
            resolved = choice_resolved(cfg, history, settled, self.state.ceiling_failed,
                                       self.state.confirmations)
            reason += self._confirmed_note(chosen, candidate, confirmation, settled)
            if self.state.strict and not resolved:
                return SweepOutcome(failed_status("not_resolved"), archive.path, archive.id,
                                    None, f"{reason}; --strict: nothing written")
            written = self._write(candidate, figures, settled, resolved)
            return SweepOutcome(STATUS_OK, archive.path, archive.id, candidate, reason,
                                written, figures, resolved)
        why = reason if chosen is None else f"{reason}; every candidate failed confirmation"
        return SweepOutcome(failed_status("no_acceptable_value"), archive.path, archive.id,
                            None, why)

    def _confirmed_note(self, chosen: Point, candidate: Point, confirmation: dict,
                        settled: Settled) -> str:
        """What the reason adds once ``candidate`` passed: a fallback, and NOT RESOLVED."""
        note = "" if candidate is chosen else (f"; {chosen.value} was rejected by the "
                                               f"sustained run, {candidate.value} confirmed "
                                               "instead (not the value the settling showed)")
        if confirmation.get("shortfall"):
            return f"{note}; NOT RESOLVED: {confirmation['shortfall']}"
        return note + verdict_note(settled, self.state.config.plateau_threshold,
                                   self._window_minutes())

    def _confirm(self, candidate: Point) -> dict:
        done = [c for c in self.state.confirmations if c["value"] == candidate.value]
        if done:
            return done[-1]
        seconds = self._confirm_seconds()
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

    def _decision(self, settled: Settled) -> dict[str, Any]:
        """What the verdict rests on, with the budget given and spent."""
        record = settled.to_dict(self.state.config.plateau_threshold, self._window_minutes())
        record["budget"] = {"minutes": self._budget(),
                            "spent": round(self.session.elapsed() / 60.0, 1)}
        return record

    def _write(self, chosen: Point, figures: dict, settled: Settled, resolved: bool) -> Path:
        quality = self.state.figures.get(str(chosen.value), {}).get("quality")
        return write_validated_revision(
            self.session.archive, self.loaded, {("engine", self.state.config.param):
                                                chosen.value},
            figures, by=KIND, output=Path(self.state.output), quality=quality,
            knee=knee_record(self.state.knee), resolved=resolved,
            decision=self._decision(settled),
            load_average=load_summary(self.state.load_samples))
