"""`mopt optimize`: baseline -> candidates (quantize, measure, gate) -> sweep -> revision.

Every stage is its own archived run under the pipeline's ``steps/`` folder (a ``run`` for a
measurement, ``quantize`` for a checkpoint, ``eval`` for the gate, ``sweep`` for the sweep),
and the pipeline's ``state.json`` links them. The state is saved after each stage, so after
Ctrl-C ``--resume runs/<id>`` skips what finished (an interrupted sweep is resumed, not
restarted). The archive, ``state.json`` and sealing are the search core's
(:class:`~model_optimizer.search.core.session.SearchSession`); this module keeps the stages. The
survivor is the fastest configuration (``optimize.objective``) among the
baseline and the candidates that ran and passed the quality gate; ``optimize.survivor:
best_candidate`` leaves the baseline out when a candidate passed (memory, not speed, is
what a quantized model buys on a small batch).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from model_optimizer.archive import STATUS_INTERRUPTED, STATUS_OK, utc_now
from model_optimizer.errors import UsageError
from model_optimizer.events import (
    ArchiveOpened,
    Event,
    StageDone,
    StageSkipped,
    StageStarted,
    eta_s,
)
from model_optimizer.plan import load_model_config
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.recipe.render import model_location
from model_optimizer.search.core.session import (
    EventCallback,
    RevisionOutcome,
    SearchSession,
    SearchState,
    read_search_archive,
)
from model_optimizer.search.measure import measure_configuration
from model_optimizer.search.optimize import gate as quality_gate
from model_optimizer.search.optimize.candidates import (
    Candidate,
    candidates_of,
    cannot_run,
    checkpoint_values,
)

KIND = "optimize"


@dataclass(kw_only=True)
class OptimizeState(SearchState):
    """Everything needed to resume: the inputs and each finished stage's record."""

    force: bool = False
    stages: dict[str, dict] = field(default_factory=dict)
    survivor: str | None = None
    ungated: list[str] = field(default_factory=list)  # --no-quality-gate: fields not gated


@dataclass
class OptimizeOutcome(RevisionOutcome):
    """How the pipeline ended (``exit_code``: 0 a validated revision was written; 4 nothing
    ran well enough; 130 interrupted)."""

    status: str
    archive: Path
    pipeline_id: str
    survivor: str | None = None
    written: Path | None = None
    reason: str = ""
    rows: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        """JSON-ready summary."""
        return {"status": self.status, "pipeline_id": self.pipeline_id,
                "archive": str(self.archive), "survivor": self.survivor,
                "written": str(self.written) if self.written else None,
                "reason": self.reason, "rows": self.rows}


class Pipeline:
    """Runs one optimize pipeline (new or resumed) in its search session."""

    def __init__(self, session: SearchSession):
        self.session = session
        self.loaded, self.archive = session.loaded, session.archive
        self.state: OptimizeState = session.state  # type: ignore[assignment]
        self.emit = session.emit
        self.steps = session.steps_dir
        self.candidates = candidates_of(self.loaded.resolved)
        self.settings = self.loaded.resolved["optimize"]
        self.objective = ("goodput_qps" if any(v is not None for v in
                                               self.loaded.resolved["slo"].values())
                          else self.settings["objective"])
        self._baseline_eval = None

    def run(self) -> OptimizeOutcome:
        """All stages; the archive is sealed whatever stops them (Ctrl-C or an error)."""
        return self.session.run(self._stages, self._finish, self._outputs,
                                seal_on_error=True)

    def _stages(self) -> OptimizeOutcome:
        outcome = OptimizeOutcome(STATUS_INTERRUPTED, self.archive.path, self.archive.id)
        self._stage("baseline", self._baseline)
        for candidate in self.candidates:
            self._stage(candidate.name, lambda c=candidate: self._candidate(c))
        survivor = self._survivor()
        self.state.survivor = survivor
        if survivor is None:
            outcome.status, outcome.reason = "failed:no_survivor", "nothing ran"
        else:
            if self.settings["sweep"]:
                self._stage("sweep", lambda: self._sweep(survivor))
            outcome.written = self._write(survivor)
            outcome.status = STATUS_OK
        outcome.survivor = survivor
        return outcome

    def _finish(self, outcome: OptimizeOutcome) -> tuple[str, dict]:
        from model_optimizer.search.optimize.report import markdown_table

        outcome.rows = self._outputs()
        outcome.reason = "\n".join(filter(None, [outcome.reason,
                                                  markdown_table(outcome.rows)]))
        return outcome.status, {"survivor": outcome.survivor}

    def _outputs(self) -> list[dict]:
        """report.md, summary.csv and plot.png of the stages so far; their rows."""
        from model_optimizer.search.optimize.report import write_outputs

        return write_outputs(self.archive, self.state, self.objective)

    # --- stages ------------------------------------------------------------------------

    def _stage(self, name: str, body: Callable[[], dict]) -> dict:
        done = self.state.stages.get(name)
        if done and done.get("finished_at"):
            self.emit(StageSkipped(name, done.get("status")))
            return done
        finished = sum(1 for stage in self.state.stages.values() if stage.get("finished_at"))
        total = 1 + len(self.candidates) + (1 if self.settings["sweep"] else 0)
        self.emit(StageStarted(name, finished, total,
                               eta_s(self.session.elapsed(), finished, total)))
        started, clock = utc_now(), time.monotonic()
        record = body()
        record.update(started_at=started, finished_at=utc_now(),
                      seconds=round(time.monotonic() - clock, 1))
        self.state.stages[name] = record
        self.session.save()
        self.emit(StageDone(name, record))
        return record

    def _measure(self, step: LoadedRecipe, model_dir: Path,
                 evaluate: quality_gate.ServerEval | None = None) -> dict:
        config_file = model_dir / "config.json"
        model_config = load_model_config(config_file) if config_file.is_file() else None
        measured = measure_configuration(step, self.steps, repeats=1, objective=self.objective,
                                         model_config=model_config, on_event=self.emit,
                                         while_serving=evaluate)
        return {"status": "ok" if measured.status == "ok" else measured.status,
                "reason": measured.reason, "figures": measured.figures,
                "run_ids": measured.run_ids}

    def _baseline(self) -> dict:
        model_dir = Path(model_location(self.loaded.resolved, self.loaded.base_dir))
        why_not = quality_gate.gate_configured(self.loaded)
        evaluate = None if why_not else quality_gate.ServerEval(self.loaded, self.steps,
                                                                on_event=self.emit)
        record = {"kind": "baseline", "what": "the recipe as given",
                  **self._measure(self.loaded, model_dir, evaluate)}
        if evaluate is None:
            record["gate"] = {"gated": False, "passed": True, "reasons": [why_not]}
        else:
            record["gate"] = evaluate.reference()
            self._baseline_eval = evaluate.outcome.result if evaluate.outcome else None
        return record

    def _candidate(self, candidate: Candidate) -> dict:
        record = {"kind": "candidate", "what": candidate.describe()}
        step = self.loaded.varied(candidate.engine_values(), candidate.source)
        if reason := cannot_run(candidate, step.resolved):
            return {**record, "status": "skipped", "reason": reason}
        model_dir = Path(model_location(step.resolved, step.base_dir))
        if candidate.quantizes:
            made = self._checkpoint(candidate)
            record["checkpoint"] = made
            model_dir = Path(made["folder"])
            step = step.varied(checkpoint_values(made), f"{candidate.source} checkpoint")
        evaluate, verdict = self._gate_hook(step)
        record.update(self._measure(step, model_dir, evaluate))
        if evaluate is not None:
            verdict = evaluate.verdict()
        record["gate"] = verdict.to_dict()
        if record["status"] == "ok" and not verdict.passed:
            record["status"], record["reason"] = "gated", "; ".join(verdict.reasons)
        return record

    def _checkpoint(self, candidate: Candidate) -> dict:
        from model_optimizer.quantize.run import make_checkpoint

        quant = self.loaded.varied(candidate.quantize_values(), candidate.source)
        out_dir = Path(self.state.output).resolve().parent
        made = make_checkpoint(quant, self.steps, out_dir, force=self.state.force,
                               on_event=self.emit)
        return {"folder": str(made.folder), "pins": made.pins, "weight_bits": made.weight_bits,
                "archive": made.archive.name, "seconds": made.seconds}

    def _gate_hook(self, step: LoadedRecipe):
        """The eval to run on the candidate's server, or (None, the verdict without one):
        not gated (--no-quality-gate), or failed because the baseline has no eval."""
        baseline = self.state.stages["baseline"].get("gate") or {}
        if not baseline.get("gated"):
            why = "; ".join(r for r in baseline.get("reasons") or [] if r)
            return None, quality_gate.Verdict(False, True, reasons=[
                f"{quality_gate.NOT_GATED}: {why}" if self.state.ungated else why])
        if not baseline.get("passed") or not baseline.get("run_id"):
            return None, quality_gate.Verdict(True, False, reasons=[
                "no baseline eval to compare with: " + "; ".join(baseline.get("reasons") or [])])
        if self._baseline_eval is None:
            self._baseline_eval = quality_gate.load_baseline_eval(
                self.loaded, baseline["run_id"], self.steps)
        return quality_gate.ServerEval(step, self.steps, self._baseline_eval, self.emit), None

    def _survivor(self) -> str | None:
        passed = [name for name, rec in self.state.stages.items()
                  if rec.get("kind") == "candidate" and rec.get("status") == "ok"]
        pool = passed if passed and self.settings["survivor"] == "best_candidate" \
            else ["baseline", *passed]
        ran = [name for name in pool if self.state.stages[name].get("status") == "ok"]
        return max(ran, key=lambda n: self.state.stages[n]["figures"].get(self.objective) or 0,
                   default=None)

    def survivor_recipe(self, name: str) -> LoadedRecipe:
        """The survivor as a recipe (the original with the candidate's overrides)."""
        record = self.state.stages[name]
        if name == "baseline":
            return self.loaded
        candidate = next(c for c in self.candidates if c.name == name)
        survivor = self.loaded.varied(candidate.engine_values(), candidate.source)
        if made := record.get("checkpoint"):
            survivor = survivor.varied(checkpoint_values(made), f"{candidate.source} checkpoint")
        return survivor

    def _sweep(self, survivor: str) -> dict:
        from model_optimizer.search.sweep.flags import SweepFlags
        from model_optimizer.search.sweep.loop import resume_sweep, start_sweep

        previous = self.state.stages.get("sweep") or {}
        output = self.archive.path / "recipe.swept.yaml"
        if previous.get("sweep_dir") and Path(previous["sweep_dir"]).is_dir():
            outcome = resume_sweep(Path(previous["sweep_dir"]), on_event=self.emit)
        else:
            def remember(event: Event) -> None:
                if isinstance(event, ArchiveOpened) \
                        and "sweep_dir" not in self.state.stages.get("sweep", {}):
                    self.state.stages["sweep"] = {"sweep_dir": event.path}
                    self.session.save()
                self.emit(event)

            outcome = start_sweep(self.survivor_recipe(survivor), self.steps,
                                  flags=SweepFlags(param="max_num_seqs"), output=output,
                                  on_event=remember)
        return {"kind": "sweep", "what": f"max_num_seqs sweep on {survivor}",
                "status": "ok" if outcome.written else "failed", "reason": outcome.reason,
                "sweep_dir": str(outcome.archive), "figures": outcome.figures,
                "chosen": outcome.chosen.value if outcome.chosen else None,
                "resolved": outcome.resolved, "survivor": survivor}

    def _write(self, survivor: str) -> Path | None:
        from model_optimizer.search.core.revision import write_validated_revision
        from model_optimizer.search.optimize.report import final_changes

        swept = self.state.stages.get("sweep")
        if swept and swept.get("status") != "ok":
            return None
        figures = (swept or self.state.stages[survivor])["figures"]
        changes = final_changes(self.state, survivor, self.candidates,
                                Path(self.state.output).resolve().parent)
        return write_validated_revision(self.archive, self.loaded, changes, figures,
                                        by="optimize", output=Path(self.state.output),
                                        quality=self._survivor_quality(survivor),
                                        resolved=(swept or {}).get("resolved"))

    def _survivor_quality(self, survivor: str) -> dict | None:
        """The survivor's gate verdict for ``validated.quality`` (None for the baseline, the
        reference itself, and for a candidate that was not gated)."""
        gate = self.state.stages[survivor].get("gate") or {}
        if survivor == "baseline" or not gate.get("gated"):
            return None
        reference = self.state.stages["baseline"].get("gate") or {}
        return {"passed": gate.get("passed"), "figures": gate.get("figures") or {},
                "reasons": gate.get("reasons") or [], "candidate_run": gate.get("run_id"),
                "baseline_run": reference.get("run_id")}


def _check_candidates(loaded: LoadedRecipe) -> list[str]:
    """Every candidate's overrides validate (exit 2 before anything is launched); returns the
    output-changing fields the candidates that can run here would change."""
    fields = []
    for candidate in candidates_of(loaded.resolved):
        try:
            step = loaded.varied({**candidate.quantize_values(), **candidate.engine_values()},
                                 candidate.source)
        except UsageError as exc:
            raise UsageError(f"optimize.candidates {candidate.name}: {exc}") from None
        if cannot_run(candidate, step.resolved) is None:
            fields += (["model.quantization"] if candidate.quantizes else []) + (
                ["engine.kv_cache_dtype"] if candidate.kv_cache_dtype else [])
    return list(dict.fromkeys(fields))


def start_optimize(loaded: LoadedRecipe, runs_base: str | Path, *, output: Path | None = None,
                   force: bool = False, no_quality_gate: bool = False,
                   on_event: EventCallback | None = None) -> OptimizeOutcome:
    """Begin a new pipeline for ``loaded`` and run it to the end. A candidate that changes
    the model's answers needs the recipe's quality gate, or ``no_quality_gate`` (the user's
    explicit ``--no-quality-gate``, recorded in the state, the report and the revision)."""
    ungated = quality_gate.require_gate(loaded, _check_candidates(loaded), no_quality_gate)
    state = OptimizeState(recipe_file=str(loaded.path), overrides=list(loaded.overrides),
                          output=str(output or loaded.path), force=force, ungated=ungated)
    session = SearchSession.create(KIND, loaded, runs_base, lambda _archive: state, on_event)
    session.announce()
    return Pipeline(session).run()


def resume_optimize(folder: Path, *, on_event: EventCallback | None = None) -> OptimizeOutcome:
    """Continue an interrupted pipeline without redoing finished stages."""
    state, finished = read_search_archive(KIND, folder, OptimizeState)
    if finished:
        raise UsageError(f"{folder}: this pipeline already finished; nothing to resume")
    session = SearchSession.resume(KIND, folder, state, on_event)
    session.announce(resumed=len(state.stages))
    return Pipeline(session).run()
