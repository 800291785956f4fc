"""``mopt split FLEET``'s experiment: the fleet's workload against one server and against the fleet
through its router, alternating in rounds, every window archived.

A round is one window of each arm, the order rotating (single then fleet, then fleet then
single, ...; with the replicas, S F R, F R S, R S F, ...: :func:`window_order`), so a slow
minute of the machine hits every arm alike and each arm takes each place in turn; a round's
windows make the pairs. Each window is a whole run (launch, warm-up, load, stop:
``runner.run_recipe`` for the single server, ``fleet.run.run_fleet`` for the fleet and its
router, and for the replicas (``--replicas``: ``fleet/replicas.py``) behind the same router)
archived under the experiment's ``steps/``; one arm is up at a time, so each has the whole
machine and a GPU never holds both. The same seeded requests are sent in every window.

The experiment's archive (kind ``fleet-split``) holds the fleet as given, the single server as
checked (``single.yaml``), the replicas when they run (``replicas.yaml``: each one's instance,
cores, share, ``max_num_seqs``; the router's strategy), one line per window as it ends
(``windows.jsonl``, ``arm`` single, fleet or replicas), and, written in ``finally`` whatever
happened (a failed window, Ctrl-C, a bug), the verdict on the rounds completed
(``verdict.json``, from the ``judge`` the caller passes: the paired rule lives with the
search's) and ``report.md``. Every engine and router is stopped by the run that started it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

from model_optimizer.archive import (
    STATUS_INTERRUPTED,
    STATUS_OK,
    RunArchive,
    failed_status,
    utc_now,
)
from model_optimizer.archive.names import (
    GIVEN_RECIPE,
    REPORT_FILE,
    STEPS_DIR,
    VERDICT_FILE,
    WINDOWS_FILE,
)
from model_optimizer.archive.report import fmt
from model_optimizer.archive.start import write_start
from model_optimizer.engine.classify import INTERNAL_ERROR
from model_optimizer.engine.factory import EngineFactory
from model_optimizer.events import ArchiveOpened, EventCallback, quiet
from model_optimizer.fleet.launch import router_executable
from model_optimizer.fleet.run import run_fleet
from model_optimizer.fleet.spec import LoadedFleet
from model_optimizer.load.figures import Figures
from model_optimizer.reaper import reap_abandoned
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.runner import RunOutcome, check_model_present, effective_workload, run_recipe
from model_optimizer.signals import interrupts_deferred

KIND = "fleet-split"
SINGLE_ARM, FLEET_ARM, REPLICAS_ARM = "single", "fleet", "replicas"
SINGLE_FILE, REPLICAS_FILE = "single.yaml", "replicas.yaml"
#: the figures of each arm, per class and overall
FIGURE_KEYS = ("qps", "ttft_p50_ms", "ttft_p99_ms", "e2e_p99_ms")


@dataclass(frozen=True)
class ArmFigures:
    """One window's figures for one class (or the whole run)."""

    qps: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    e2e_p99_ms: float | None = None
    slo_met: bool | None = None
    completed: int | None = None

    @classmethod
    def of(cls, figures: Figures) -> ArmFigures:
        """From a run's (or a class's) figures."""
        return cls(figures.qps, figures.ttft_p50_ms, figures.ttft_p99_ms, figures.e2e_p99_ms,
                   figures.slo_met, figures.completed)

    def value(self, key: str) -> float | None:
        """A figure of :data:`FIGURE_KEYS` by name."""
        return getattr(self, key)


@dataclass(frozen=True)
class SplitWindow:
    """One window of one arm: its run's archive, how it ended, its figures."""

    round: int  # 1-based
    arm: str
    run_id: str
    status: str
    overall: ArmFigures = field(default_factory=ArmFigures)
    classes: dict[str, ArmFigures] = field(default_factory=dict)
    failure: str | None = None
    routing_problems: tuple[str, ...] = ()

    @property
    def usable(self) -> bool:
        """Completed, and (the fleet) routed as its rules say: a window the verdict uses."""
        return self.status == STATUS_OK and not self.routing_problems

    def to_dict(self) -> dict:
        """JSON form (a line of windows.jsonl)."""
        data = asdict(self)
        data["routing_problems"] = list(self.routing_problems)
        return data

    @classmethod
    def from_dict(cls, data: dict) -> SplitWindow:
        """Back from :meth:`to_dict`."""
        return cls(data["round"], data["arm"], data["run_id"], data["status"],
                   ArmFigures(**data.get("overall") or {}),
                   {k: ArmFigures(**v) for k, v in (data.get("classes") or {}).items()},
                   data.get("failure"), tuple(data.get("routing_problems") or ()))


class Judged(Protocol):
    """What a judge returns: the verdict as JSON and as report lines."""

    def to_dict(self) -> dict: ...

    def markdown(self) -> list[str]: ...


Judge = Callable[[list[SplitWindow]], Judged]


@dataclass
class SplitRun:
    """The experiment: its archive, every window, how it ended, the verdict."""

    archive: Path
    run_id: str
    windows: list[SplitWindow]
    status: str = STATUS_INTERRUPTED
    failed: RunOutcome | None = None  # the window that failed (the experiment stopped there)
    judged: Judged | None = None


def window_order(rounds: int, arms: tuple[str, ...] = (SINGLE_ARM, FLEET_ARM)
                 ) -> list[tuple[int, str]]:
    """(round, arm) in the order they run: the arms' order rotates by one place each round
    (two arms: S F, F S, ...; three: S F R, F R S, R S F, ...), so each arm takes each
    place as often as the rounds allow."""
    out = []
    for number in range(1, rounds + 1):
        shift = (number - 1) % len(arms)
        out += [(number, arm) for arm in arms[shift:] + arms[:shift]]
    return out


def window_of(number: int, arm: str, outcome: RunOutcome) -> SplitWindow:
    """The window record of one arm's run."""
    figures = outcome.figures
    classes = {name: ArmFigures.of(part) for name, part in (figures.classes or {}).items()}
    failure = outcome.failure.kind if outcome.failure is not None else None
    problems = (outcome.metrics.get("routing") or {}).get("problems") or []
    return SplitWindow(number, arm, outcome.run_id, outcome.status, ArmFigures.of(figures),
                       classes, failure, tuple(problems))


def run_split(fleet: LoadedFleet, single: LoadedRecipe, runs_base: str | Path, *, rounds: int,
              judge: Judge, on_event: EventCallback | None = None,
              on_window: Callable[[SplitWindow], None] | None = None,
              engine_factory: EngineFactory | None = None,
              replicas: LoadedFleet | None = None) -> SplitRun:
    """Run ``rounds`` rounds of the single server, the fleet and (given) the replicas,
    archived as one experiment; stops at the first window that fails. Ctrl-C is re-raised
    after the archive is sealed with the verdict on the rounds completed."""
    emit = on_event or quiet
    check_model_present(single)
    router_executable()  # before anything starts: the setup step if it is missing
    workload = effective_workload(fleet.front.spec)
    reap_abandoned(runs_base)
    archive = RunArchive.create(runs_base, f"{fleet.name}-split", kind=KIND, start=lambda new: (
        _start_files(new, fleet, single, rounds, workload, replicas)))
    emit(ArchiveOpened(archive.id, str(archive.path)))
    run = SplitRun(archive.path, archive.id, [])
    try:
        arms = (SINGLE_ARM, FLEET_ARM, *((REPLICAS_ARM,) if replicas is not None else ()))
        for number, arm in window_order(rounds, arms):
            served = replicas if arm == REPLICAS_ARM and replicas is not None else fleet
            outcome = _one_window(served, single, archive, number, arm, workload, emit,
                                  engine_factory)
            window = window_of(number, arm, outcome)
            run.windows.append(window)
            archive.append_jsonl(WINDOWS_FILE, window.to_dict())
            if on_window is not None:
                on_window(window)
            if not outcome.ok:
                run.failed = outcome
                break
        run.status = STATUS_OK if run.failed is None else run.failed.status
    except Exception:
        run.status = failed_status(INTERNAL_ERROR)  # a bug: archived as failed, re-raised
        raise
    finally:
        with interrupts_deferred():
            run.judged = judge(run.windows)
            _finish(archive, fleet, run)
    return run


def _start_files(archive: RunArchive, fleet: LoadedFleet, single: LoadedRecipe, rounds: int,
                 workload: dict, replicas: LoadedFleet | None) -> None:
    extra = {"kind": KIND, "fleet": fleet.name, "rounds": rounds, "workload": workload,
             "single": {"name": single.name, "recipe_file": str(single.path or "")},
             "instances": {name: list(inst.classes) for name, inst in fleet.instances.items()},
             "replicas": replicas.resolved if replicas is not None else None}
    write_start(archive, fleet.front, extra)
    archive.write_text(GIVEN_RECIPE, fleet.source_text)
    archive.write_yaml(SINGLE_FILE, single.resolved,
                       header=f"# the single server {fleet.name} is compared with, as run\n")
    if replicas is not None:
        archive.write_text(REPLICAS_FILE, replicas.source_text)


def _one_window(fleet: LoadedFleet, single: LoadedRecipe, archive: RunArchive, number: int,
                arm: str, workload: dict, emit: EventCallback,
                factory: EngineFactory | None) -> RunOutcome:
    """One arm's window: a whole run archived under the experiment's steps/ (``fleet``: the
    fleet, or the replicas, behind the router)."""
    steps = archive.path / STEPS_DIR
    archive.set_status("running", phase=f"round {number}: {arm}")
    if arm != SINGLE_ARM:
        return run_fleet(fleet, steps, on_event=emit, engine_factory=factory)
    return run_recipe(single, steps, on_event=emit, workload_override=workload,
                      engine_factory=factory,
                      archive_extra={"split": {"parent": archive.id, "round": number}})


def _finish(archive: RunArchive, fleet: LoadedFleet, run: SplitRun) -> None:
    """verdict.json, report.md, the status; sealed. Runs in ``finally``."""
    try:
        verdict = run.judged.to_dict() if run.judged is not None else {}
        archive.write_json(VERDICT_FILE, {**verdict, "windows": len(run.windows)})
        archive.write_text(REPORT_FILE, split_report(archive.id, fleet, run))
    finally:
        failure = run.failed.failure.to_dict() if run.failed and run.failed.failure else None
        archive.set_status(run.status, phase="finished", finished_at=utc_now(),
                           failure=failure)
        archive.close()


def figures_row(window: SplitWindow, name: str | None) -> list[str]:
    """A table row: round, arm, class, the figures, the SLO verdict."""
    part = window.overall if name is None else window.classes.get(name, ArmFigures())
    slo = "-" if part.slo_met is None else ("met" if part.slo_met else "missed")
    return [str(window.round), window.arm, name or "overall", fmt(part.qps, 2),
            fmt(part.ttft_p50_ms), fmt(part.ttft_p99_ms), fmt(part.e2e_p99_ms), slo]


ROUND_COLUMNS = ("round", "arm", "class", "req/s", "TTFT p50", "TTFT p99", "E2E p99", "SLO")


def split_report(run_id: str, fleet: LoadedFleet, run: SplitRun) -> str:
    """report.md: each window's figures overall and per class, then the verdict."""
    lines = [f"# Split or not: {fleet.name} ({run_id})", "",
             f"- status: {run.status}; windows: {len(run.windows)} "
             f"(each archived under {STEPS_DIR}/)", "",
             "| " + " | ".join(ROUND_COLUMNS) + " |", "|---|---|---|" + "---:|" * 4 + "---|"]
    for window in run.windows:
        for name in [None, *sorted(window.classes)]:
            lines.append("| " + " | ".join(figures_row(window, name)) + " |")
    unusable = [w for w in run.windows if not w.usable]
    if unusable:
        lines += ["", "Not used by the verdict:", *(
            f"- round {w.round}, {w.arm}: {w.status}"
            f"{' (' + w.failure + ')' if w.failure else ''}"
            f"{''.join('; routing: ' + p for p in w.routing_problems)}" for w in unusable)]
    if run.judged is not None:
        lines += ["", *run.judged.markdown()]
    return "\n".join(lines) + "\n"
