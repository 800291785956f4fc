"""The sweep loop: ask the strategy for a value, measure it with apply's machinery, repeat.

Every step is a full run archive under ``<sweep>/steps/``; the loop's own state (config,
history, decisions) is rewritten atomically after each step to ``<sweep>/state.json``, so an
interrupted sweep resumes without rerunning finished steps and, because the strategy is a
pure function of the history, ends exactly where an uninterrupted one would have.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from model_optimizer.archive import (
    STATUS_INTERRUPTED,
    STATUS_OK,
    RunArchive,
    failed_status,
    utc_now,
)
from model_optimizer.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_SLO_FAILED, UsageError
from model_optimizer.measure import measure_configuration, step_figures, variant
from model_optimizer.plan import load_model_config
from model_optimizer.quality.search_gate import SearchGate
from model_optimizer.recipe import LoadedRecipe, load_recipe_text
from model_optimizer.recipe.rules import CATEGORICAL_KNOBS, NUMERIC_KNOBS
from model_optimizer.runner import RunOutcome, run_recipe
from model_optimizer.search import (  # noqa: F401 - hardware_label: shared, re-exported
    default_model_config,
    hardware_label,
    write_validated_revision,
)
from model_optimizer.sweep.outputs import write_outputs
from model_optimizer.sweep.strategy import (
    Point,
    SweepConfig,
    choose,
    fallback_candidates,
    next_value,
)

EventCallback = Callable[[str, dict], None]
FLOAT_KNOBS = {"gpu_memory_utilization"}


@dataclass
class SweepState:
    """Everything needed to resume: the sweep's inputs and what was measured so far."""

    config: SweepConfig
    recipe_file: str
    overrides: list[str]
    tie_concurrency: bool
    objective: str
    output: str
    model_config: str | None
    history: list[Point] = field(default_factory=list)
    decisions: list[dict] = field(default_factory=list)
    figures: dict[str, dict] = field(default_factory=dict)  # str(value) -> step figures
    confirmations: list[dict] = field(default_factory=list)
    started_at: str = field(default_factory=utc_now)
    elapsed_s: float = 0.0
    quality_baseline: str | None = None   # the quality gate's baseline eval (steps/<id>)

    def to_dict(self) -> dict:
        """JSON form for state.json."""
        return {"config": self.config.to_dict(), "recipe_file": self.recipe_file,
                "overrides": self.overrides, "tie_concurrency": self.tie_concurrency,
                "objective": self.objective, "output": self.output,
                "model_config": self.model_config,
                "history": [p.to_dict() for p in self.history], "decisions": self.decisions,
                "figures": self.figures, "confirmations": self.confirmations,
                "started_at": self.started_at, "elapsed_s": self.elapsed_s,
                "quality_baseline": self.quality_baseline}

    @classmethod
    def from_dict(cls, data: dict) -> SweepState:
        """Inverse of :meth:`to_dict`."""
        return cls(SweepConfig.from_dict(data["config"]), data["recipe_file"],
                   data["overrides"], data["tie_concurrency"], data["objective"],
                   data["output"], data.get("model_config"),
                   [Point.from_dict(p) for p in data["history"]], data["decisions"],
                   data["figures"], data["confirmations"], data["started_at"],
                   data.get("elapsed_s", 0.0), data.get("quality_baseline"))


@dataclass
class SweepOutcome:
    """How a sweep ended."""

    status: str
    archive: Path
    sweep_id: str
    chosen: Point | None = None
    reason: str = ""
    written: Path | None = None
    figures: dict = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        """0 when a recipe revision was written, 4 when no value met the SLOs, 130 interrupted."""
        if self.status == STATUS_INTERRUPTED:
            return EXIT_INTERRUPTED
        return EXIT_OK if self.written else EXIT_SLO_FAILED

    def to_dict(self) -> dict:
        """JSON-ready summary."""
        return {"status": self.status, "sweep_id": self.sweep_id, "archive": str(self.archive),
                "chosen": self.chosen.to_dict() if self.chosen else None, "reason": self.reason,
                "written": str(self.written) if self.written else None, "figures": self.figures}


def build_config(recipe: dict, on_cpu: bool, **flags) -> SweepConfig:
    """SweepConfig from the recipe's sweep section, CLI flags winning."""
    section = {**recipe["sweep"], **{k: v for k, v in flags.items() if v is not None}}
    param = section["param"]
    if param not in NUMERIC_KNOBS + CATEGORICAL_KNOBS:
        raise UsageError(f"--param {param}: not a knob mopt can sweep; choose one of "
                         f"{', '.join(NUMERIC_KNOBS + CATEGORICAL_KNOBS)}")
    if param in CATEGORICAL_KNOBS and not section.get("values"):
        raise UsageError(f"--param {param} is categorical: give the values to try with "
                         "--values, e.g. --values auto,fp8")
    if param in NUMERIC_KNOBS and not section.get("values") and section.get("start") is None:
        current = recipe["engine"].get(param)
        if current is None:
            raise UsageError(f"--param {param}: give --start (the recipe sets no {param} and "
                             "no sweep.start)")
        section["start"] = current
    return SweepConfig(
        param=param, start=section.get("start"), growth=section["growth"],
        step=section.get("step"), max=section.get("max"), values=section.get("values"),
        plateau_threshold=section["plateau_threshold"], resolution=section["resolution"],
        integer=param not in FLOAT_KNOBS,
        multiple_of=32 if (param == "block_size" and on_cpu) else None,
        max_launches=section.get("max_launches"))


class SweepRunner:
    """Runs one sweep (new or resumed) into its archive folder."""

    def __init__(self, loaded: LoadedRecipe, archive: RunArchive, state: SweepState,
                 on_event: EventCallback | None = None,
                 measure: Callable[[object, str], Point] | None = None):
        self.loaded = loaded
        self.archive = archive
        self.state = state
        self.emit = on_event or (lambda phase, data: None)
        self.measure = measure or self._measure_for_real
        self.repeats = loaded.resolved["sweep"]["repeats"]
        self.max_minutes = loaded.resolved["sweep"].get("max_minutes")
        self.model_config = (load_model_config(state.model_config)
                             if state.model_config else None)
        self.quality = SearchGate(loaded, archive.path / "steps",
                                  baseline_run=state.quality_baseline, on_event=self.emit)
        self._clock = time.monotonic()

    # ----- the loop ---------------------------------------------------------------------
    def run(self) -> SweepOutcome:
        """Search, choose, confirm, write; archive as it goes. Re-raises KeyboardInterrupt."""
        try:
            self._search()
            outcome = self._choose_and_confirm()
        except KeyboardInterrupt:
            self._save()
            self.archive.set_status(STATUS_INTERRUPTED, phase="interrupted",
                                    resume=f"mopt sweep --resume {self.archive.path}")
            write_outputs(self.archive, self.loaded, self.state, None, "interrupted")
            self.archive.close()  # seal: manifest + run index
            raise
        self._save()
        write_outputs(self.archive, self.loaded, self.state, outcome.chosen, outcome.reason,
                      written=outcome.written)
        self.archive.set_status(outcome.status, phase="finished", finished_at=utc_now(),
                                chosen=outcome.chosen.value if outcome.chosen else None,
                                written=str(outcome.written) if outcome.written else None)
        self.archive.close()  # seal: manifest + run index
        return outcome

    def _search(self) -> None:
        while True:
            decision = next_value(self.state.config, self.state.history)
            if decision.value is None or self._out_of_time():
                reason = decision.reason if decision.value is None else (
                    f"time budget of {self.max_minutes} min spent")
                self._record_decision(None, decision.phase, reason, decision.stop_rule
                                      or "budget")
                return
            self._record_decision(decision.value, decision.phase, decision.reason,
                                  decision.stop_rule)
            self.emit("step", {"index": len(self.state.history) + 1, "value": decision.value,
                               "phase": decision.phase, "reason": decision.reason})
            point = self.measure(decision.value, decision.phase)
            if isinstance(point, tuple):  # (Point, figures) from an injected measure
                point, self.state.figures[str(point.value)] = point
            self.state.history.append(point)
            self._save()
            self.emit("step_done", {"value": point.value, "status": point.status,
                                    "metric": point.metric, "failure": point.failure_kind})

    def _out_of_time(self) -> bool:
        if not self.max_minutes:
            return False
        return self._elapsed() > self.max_minutes * 60

    def _elapsed(self) -> float:
        return self.state.elapsed_s + (time.monotonic() - self._clock)

    def _record_decision(self, value, phase, reason: str, stop_rule) -> None:
        self.state.decisions.append({"value": value, "phase": phase, "reason": reason,
                                     "stop_rule": stop_rule, "at": utc_now()})

    def _save(self) -> None:
        self.state.elapsed_s = self._elapsed()
        self._clock = time.monotonic()
        self.archive.write_json("state.json", self.state.to_dict())

    # ----- measuring one value ------------------------------------------------------------
    def step_recipe(self, value) -> LoadedRecipe:
        """The recipe with the swept value (and tied concurrency) applied."""
        extra = [f"engine.{self.state.config.param}={_yaml_value(value)}"]
        if self.state.tie_concurrency:
            extra.append(f"workload.concurrency={int(value)}")
        return variant(self.loaded, extra)

    def _measure_for_real(self, value, phase: str) -> tuple[Point, dict]:
        measured = measure_configuration(
            self.step_recipe(value), self.archive.path / "steps", repeats=self.repeats,
            objective=self.state.objective, model_config=self.model_config,
            on_event=self.emit, archive_extra={"sweep": self.archive.id, "value": value},
            quality_gate=self._quality_gate if self.quality.enabled else None)
        if measured.status == "skipped":
            self.emit("skipped", {"value": value, "reason": measured.reason})
        point = Point(value=value, phase=phase, status=measured.status,
                      metric_samples=measured.samples, slo_met=measured.slo_met,
                      preemptions=measured.preemptions, failure_kind=measured.failure_kind,
                      launches=len(measured.run_ids), run_ids=measured.run_ids)
        return point, measured.figures

    def _quality_gate(self, step: LoadedRecipe):
        """The quality gate's verdict on a step (its baseline id kept for a resume)."""
        verdict = self.quality.check(step)
        if self.quality.baseline_run != self.state.quality_baseline:
            self.state.quality_baseline = self.quality.baseline_run
            self._save()
        return verdict

    def _quality_failures(self) -> str:
        failed = [f"{value} failed the quality gate ({figures.get('reason')})"
                  for value, figures in self.state.figures.items()
                  if figures.get("failure") == "quality"]
        return "; ".join(failed)

    # ----- choice, confirmation, output --------------------------------------------------
    def _choose_and_confirm(self) -> SweepOutcome:
        cfg, history = self.state.config, self.state.history
        chosen, reason = choose(cfg, history)
        if self._quality_failures():
            reason = f"{reason}; {self._quality_failures()}"
        rejected: set = {c["value"] for c in self.state.confirmations if not c["ok"]}
        candidates: list[Point] = []
        if chosen is not None:
            if chosen.value not in rejected:
                candidates.append(chosen)
            candidates += fallback_candidates(cfg, history, rejected | {chosen.value})
        for candidate in _unique(candidates):
            confirmation = self._confirm(candidate)
            if confirmation["ok"]:
                figures = confirmation.get("figures") or self.state.figures.get(
                    str(candidate.value), {})
                written = self._write(candidate, figures, confirmation)
                if candidate is not chosen:
                    reason = (f"{reason}; {chosen.value} was rejected by the sustained run, "
                              f"{candidate.value} confirmed instead")
                return SweepOutcome(STATUS_OK, self.archive.path, self.archive.id, candidate,
                                    reason, written, figures)
            rejected.add(candidate.value)
        why = reason if chosen is None else f"{reason}; every candidate failed confirmation"
        return SweepOutcome(failed_status("no_acceptable_value"), self.archive.path,
                            self.archive.id, None, why)

    def _confirm(self, candidate: Point) -> dict:
        done = [c for c in self.state.confirmations if c["value"] == candidate.value]
        if done:
            return done[-1]
        seconds = self.loaded.resolved["sweep"]["confirm_duration_s"]
        if not seconds:
            return {"value": candidate.value, "ok": True, "skipped": True}
        self.emit("confirm", {"value": candidate.value, "duration_s": seconds})
        outcome = run_recipe(self.step_recipe(candidate.value), self.archive.path / "steps",
                             on_event=self.emit,
                             workload_override={"duration_s": seconds, "num_requests": None},
                             archive_extra={"sweep": self.archive.id, "confirm": True,
                                            "value": candidate.value})
        problems = confirmation_problems(outcome, self.loaded.resolved)
        result = {"value": candidate.value, "ok": not problems, "problems": problems,
                  "run_id": outcome.run_id, "figures": step_figures(outcome)}
        self.state.confirmations.append(result)
        self._save()
        self.emit("confirmed", result)
        return result

    def _write(self, chosen: Point, figures: dict, confirmation: dict) -> Path:
        quality = self.state.figures.get(str(chosen.value), {}).get("quality")
        return write_validated_revision(
            self.archive, self.loaded, {("engine", self.state.config.param): chosen.value},
            figures, by="sweep", output=Path(self.state.output), quality=quality)


def _unique(points: list[Point]) -> list[Point]:
    seen, out = set(), []
    for point in points:
        if point.value not in seen:
            seen.add(point.value)
            out.append(point)
    return out


def _yaml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def confirmation_problems(outcome: RunOutcome, recipe: dict) -> list[str]:
    """Why a sustained run rejects its value (empty when it passes)."""
    problems = []
    if not outcome.ok:
        problems.append(f"run {outcome.status}")
    metrics = outcome.metrics or {}
    if metrics.get("failed"):
        problems.append(f"{metrics['failed']} requests failed")
    if (outcome.telemetry_peaks or {}).get("preemptions"):
        problems.append(f"{outcome.telemetry_peaks['preemptions']} preemptions")
    if outcome.ok and any(v is not None for v in recipe["slo"].values()) \
            and not metrics.get("slo_met"):
        problems.append("SLOs broken: " + "; ".join(metrics.get("slo_violations") or []))
    return problems


def start_sweep(loaded: LoadedRecipe, runs_base: str | Path, *, flags: dict,
                output: Path | None = None, model_config: Path | None = None,
                on_event: EventCallback | None = None, measure=None) -> SweepOutcome:
    """Begin a new sweep of ``loaded`` and run it to the end."""
    recipe = loaded.resolved
    config = build_config(recipe, recipe["hardware"]["accelerator"] == "cpu", **flags)
    has_slo = any(v is not None for v in recipe["slo"].values())
    state = SweepState(
        config=config, recipe_file=str(loaded.path), overrides=list(loaded.overrides),
        tie_concurrency=(config.param == "max_num_seqs"
                         and recipe["workload"].get("concurrency") is None),
        objective="goodput_qps" if has_slo else "qps",
        output=str(output or loaded.path), model_config=default_model_config(loaded, model_config))
    archive = RunArchive.create(runs_base, f"{loaded.name}-sweep", kind="sweep")
    archive.write_text("recipe.given.yaml", loaded.source_text)
    archive.write_json("state.json", state.to_dict())
    on_event and on_event("archive", {"run_id": archive.id, "path": str(archive.path)})
    return SweepRunner(loaded, archive, state, on_event, measure).run()


def resume_sweep(sweep_dir: Path, *, on_event: EventCallback | None = None,
                 measure=None) -> SweepOutcome:
    """Continue an interrupted sweep from its archive without rerunning finished steps."""
    try:
        state = SweepState.from_dict(json.loads((sweep_dir / "state.json").read_text()))
        given = (sweep_dir / "recipe.given.yaml").read_text()
        status = json.loads((sweep_dir / "status.json").read_text())
    except (OSError, ValueError, KeyError) as exc:
        raise UsageError(f"{sweep_dir}: not a resumable sweep archive ({exc}); give the "
                         "folder printed by the interrupted `mopt sweep`") from None
    if status.get("status") == STATUS_OK:
        raise UsageError(f"{sweep_dir}: this sweep already finished; nothing to resume")
    loaded = load_recipe_text(given, state.recipe_file, state.overrides)
    loaded.path = Path(state.recipe_file)
    archive = RunArchive(sweep_dir, sweep_dir.name)
    archive.set_status("running", phase="resumed", resumed_at=utc_now())
    on_event and on_event("archive", {"run_id": archive.id, "path": str(archive.path),
                                      "resumed": len(state.history)})
    return SweepRunner(loaded, archive, state, on_event, measure).run()
