"""Progress events: what long work tells its listener (the CLI's progress display).

Each event is a frozen dataclass with a ``kind`` (its name in JSON) and typed fields; the
emitter constructs one and calls the listener (an :data:`EventCallback`), which dispatches
on the class. ``to_dict()`` is the JSON form (the fields, or the archived record an event
carries). Step events of work whose count of steps is known carry ``done``/``total`` and
``eta_s`` (:func:`eta_s`). No mopt imports: every layer may emit these.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar


@dataclass(frozen=True)
class Event:
    """One progress event; subclasses set ``kind`` and add their fields."""

    kind: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the fields by name."""
        return {f.name: getattr(self, f.name) for f in fields(self)}


EventCallback = Callable[[Event], None]


def quiet(event: Event) -> None:  # noqa: ARG001 - the no-op listener
    """The listener used when none is given: ignores every event."""
    return None


def eta_s(elapsed_s: float, done: int, total: int | None) -> float | None:
    """Seconds left at the pace so far (``elapsed_s`` for ``done`` of ``total`` steps), or
    None when the total is unknown or nothing is done yet."""
    if total is None or done <= 0:
        return None
    return max(total - done, 0) * elapsed_s / done


# ----- one run (runner, capacity, eval) ---------------------------------------------------
@dataclass(frozen=True)
class ArchiveOpened(Event):
    """Where the run's (or search's) archive is; a search adds what it resumes or studies."""

    kind: ClassVar[str] = "archive"
    run_id: str
    path: str
    resumed: int | None = None
    study: str | None = None
    storage: str | None = None
    strategy: str | None = None


@dataclass(frozen=True)
class Starting(Event):
    """The server is being launched with ``argv``."""

    kind: ClassVar[str] = "starting"
    argv: list[str]


@dataclass(frozen=True)
class Waiting(Event):
    """Still waiting for the server's health (a tick)."""

    kind: ClassVar[str] = "waiting"
    elapsed_s: float


@dataclass(frozen=True)
class Ready(Event):
    """The server answered its health check."""

    kind: ClassVar[str] = "ready"
    ready_after_s: float | None


@dataclass(frozen=True)
class StartFailed(Event):
    """The server did not start; ``failure`` is the archived failure record."""

    kind: ClassVar[str] = "start_failed"
    failure: dict

    def to_dict(self) -> dict[str, Any]:
        """The failure record (``class``, ``hint``, ``evidence``, ``returncode``)."""
        return dict(self.failure)


@dataclass(frozen=True)
class LoadStarted(Event):
    """The load test starts (warm-up first)."""

    kind: ClassVar[str] = "load"
    workload: dict


@dataclass(frozen=True)
class LoadProgress(Event):
    """A live snapshot of the load (``load.client`` snapshot plus telemetry)."""

    kind: ClassVar[str] = "progress"
    phase: str
    done: int
    failed: int
    in_flight: int
    elapsed_s: float
    qps: float
    ttft_p50_ms: float | None
    stopped_reason: str | None
    telemetry: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Stopping(Event):
    """The server is being stopped."""

    kind: ClassVar[str] = "stopping"


@dataclass(frozen=True)
class Done(Event):
    """The work finished; ``result`` is its outcome's JSON form."""

    kind: ClassVar[str] = "done"
    result: dict

    def to_dict(self) -> dict[str, Any]:
        """The outcome's JSON form."""
        return dict(self.result)


# ----- capacity ---------------------------------------------------------------------------
@dataclass(frozen=True)
class WindowStarted(Event):
    """Window ``index`` offers ``rate`` req/s; at most ``total`` windows (max_windows)."""

    kind: ClassVar[str] = "window"
    index: int
    rate: float
    total: int | None = None
    eta_s: float | None = None


@dataclass(frozen=True)
class WindowDone(Event):
    """Window ``index`` judged."""

    kind: ClassVar[str] = "window_done"
    index: int
    rate: float
    passed: bool
    reason: str


# ----- eval and the quality gate ----------------------------------------------------------
@dataclass(frozen=True)
class Generated(Event):
    """``done`` of ``total`` eval generations finished."""

    kind: ClassVar[str] = "generated"
    done: int
    total: int


@dataclass(frozen=True)
class Scoring(Event):
    """Scoring next-token distributions ``on`` own answers or a baseline."""

    kind: ClassVar[str] = "scoring"
    on: str


@dataclass(frozen=True)
class LmEval(Event):
    """lm-eval runs ``tasks``."""

    kind: ClassVar[str] = "lm_eval"
    tasks: list[str]


@dataclass(frozen=True)
class QualityBaseline(Event):
    """The quality gate evaluates its baseline."""

    kind: ClassVar[str] = "quality_baseline"


@dataclass(frozen=True)
class QualityEval(Event):
    """The quality gate evaluates a step differing in output-changing ``fields``."""

    kind: ClassVar[str] = "quality_eval"
    fields: list[str]


# ----- quantize ---------------------------------------------------------------------------
@dataclass(frozen=True)
class QuantizeStarted(Event):
    """Quantizing ``scheme`` into ``output``, archived in ``archive``."""

    kind: ClassVar[str] = "start"
    archive: str
    scheme: str
    calibration: str
    output: str


@dataclass(frozen=True)
class QuantizeStage(Event):
    """A stage line of the quantizer worker."""

    kind: ClassVar[str] = "quantize_stage"
    text: str


# ----- sweep ------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepStep(Event):
    """Step ``index`` measures ``value``; ``done``/``total`` and ``eta_s`` when the number
    of steps is known (categorical values)."""

    kind: ClassVar[str] = "step"
    index: int
    value: Any
    phase: str | None
    reason: str
    done: int = 0
    total: int | None = None
    eta_s: float | None = None


@dataclass(frozen=True)
class SweepStepDone(Event):
    """A sweep step measured."""

    kind: ClassVar[str] = "step_done"
    value: Any
    status: str
    metric: float | None
    failure: str | None
    half_width: float | None


@dataclass(frozen=True)
class SweepSkipped(Event):
    """A value skipped without a launch."""

    kind: ClassVar[str] = "skipped"
    value: Any
    reason: str


@dataclass(frozen=True)
class ProbeServerStarted(Event):
    """A scanning strategy (``strategy``): one server at ``max_num_seqs`` measures every
    level."""

    kind: ClassVar[str] = "probe_server"
    max_num_seqs: int
    strategy: str = "probe-scan"


@dataclass(frozen=True)
class ProbeFailed(Event):
    """The probe server failed; the sweep goes on by launches."""

    kind: ClassVar[str] = "probe_failed"
    reason: str


@dataclass(frozen=True)
class KneeFitted(Event):
    """The fitted knee's verdict."""

    kind: ClassVar[str] = "knee"
    verdict: str
    resolved: bool


@dataclass(frozen=True)
class SweepConfirm(Event):
    """The chosen value is confirmed with a sustained run."""

    kind: ClassVar[str] = "confirm"
    value: Any
    duration_s: float


@dataclass(frozen=True)
class SweepConfirmed(Event):
    """The confirmation's verdict (the record kept in the sweep's state)."""

    kind: ClassVar[str] = "confirmed"
    value: Any
    ok: bool
    problems: list[str]
    run_id: str
    figures: dict
    shortfall: str = ""   # passed, but its throughput fell short of the search's (not resolved)


# ----- tune -------------------------------------------------------------------------------
@dataclass(frozen=True)
class TuneSeeded(Event):
    """``count`` trials enqueued first (``seeds``: the first few, seed and params)."""

    kind: ClassVar[str] = "seeded"
    seeds: list[dict]
    count: int


@dataclass(frozen=True)
class TuneTrial(Event):
    """Trial ``number`` starts; ``finished`` of ``budget`` trials are done."""

    kind: ClassVar[str] = "trial"
    number: int
    params: dict
    seed: str | None
    finished: int
    budget: int
    eta_s: float | None = None


@dataclass(frozen=True)
class TuneTrialDone(Event):
    """A trial finished; ``record`` is its summary (status, values, reason ...)."""

    kind: ClassVar[str] = "trial_done"
    record: dict

    def to_dict(self) -> dict[str, Any]:
        """The trial's record."""
        return dict(self.record)


@dataclass(frozen=True)
class TuneFinished(Event):
    """The tune ended; ``result`` is its outcome's JSON form."""

    kind: ClassVar[str] = "finished"
    result: dict

    def to_dict(self) -> dict[str, Any]:
        """The outcome's JSON form."""
        return dict(self.result)


@dataclass(frozen=True)
class TuneScan(Event):
    """Trial ``number`` scans ``levels`` on one server at ``max_num_seqs``."""

    kind: ClassVar[str] = "scan"
    number: int
    max_num_seqs: int
    levels: list[int]


@dataclass(frozen=True)
class LevelDone(Event):
    """One level of a tune scan measured."""

    kind: ClassVar[str] = "level_done"
    number: int
    max_num_seqs: int
    status: str
    failure: str | None
    objective: float | None


@dataclass(frozen=True)
class ScanFailed(Event):
    """The scan server did not start: for memory (``memory``) the scan ceiling is lowered
    for these knobs, otherwise the trial launches its own configuration."""

    kind: ClassVar[str] = "scan_failed"
    number: int
    max_num_seqs: int
    failure: str
    memory: bool = False


@dataclass(frozen=True)
class TuneConfirm(Event):
    """Trial ``number`` is confirmed with a launch of its configuration."""

    kind: ClassVar[str] = "confirm"
    number: int
    params: dict


@dataclass(frozen=True)
class TuneConfirmed(Event):
    """The confirmation's verdict (the record kept in the tune's state)."""

    kind: ClassVar[str] = "confirmed"
    number: int
    params: dict
    ok: bool
    problems: list[str]
    run_id: str
    figures: dict
    at: str
    objective: dict | None = None  # the objective's value and half-width, this run


# ----- optimize ---------------------------------------------------------------------------
@dataclass(frozen=True)
class StageStarted(Event):
    """Stage ``stage`` starts; ``done`` of ``total`` stages finished, ``eta_s`` left."""

    kind: ClassVar[str] = "stage"
    stage: str
    done: int = 0
    total: int | None = None
    eta_s: float | None = None


@dataclass(frozen=True)
class StageSkipped(Event):
    """Stage ``stage`` had finished before the resume."""

    kind: ClassVar[str] = "stage_skipped"
    stage: str
    status: str | None


@dataclass(frozen=True)
class StageDone(Event):
    """Stage ``stage`` finished; ``record`` is what the pipeline's state keeps."""

    kind: ClassVar[str] = "stage_done"
    stage: str
    record: dict

    def to_dict(self) -> dict[str, Any]:
        """The stage name and its record."""
        return {"stage": self.stage, **self.record}


def event_classes() -> dict[str, list[type[Event]]]:
    """Every event class defined here, by kind (two searches share ``confirm``)."""
    found: dict[str, list[type[Event]]] = {}
    for value in globals().values():
        if isinstance(value, type) and issubclass(value, Event) and value is not Event:
            found.setdefault(value.kind, []).append(value)
    return found
