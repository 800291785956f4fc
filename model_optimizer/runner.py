"""One measured, archived run of one recipe on the real engine.

``run_recipe`` is the shared core of ``apply``, ``sweep`` and ``tune``: validate, launch vLLM,
wait for health, warm up, load, collect telemetry, stop, archive. Whatever happens (start
failure, engine death, Ctrl-C, a bug), the server group is stopped and the archive says
what happened with whatever was measured.
"""

from __future__ import annotations

import contextlib
import logging
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
from model_optimizer.archive.entry import metric_fields
from model_optimizer.archive.names import (
    ENGINE_LOG,
    FAILURE_FILE,
    METRICS_FILE,
    REPORT_FILE,
)
from model_optimizer.archive.report import render_run_report
from model_optimizer.archive.start import scrub_log, write_start
from model_optimizer.engine import EngineProcess, EngineStartError, Failure
from model_optimizer.engine.classify import DISK_FULL, INTERNAL_ERROR, exception_failure
from model_optimizer.engine.factory import EngineFactory, plan_server
from model_optimizer.engine.placement import resolve_placement
from model_optimizer.errors import (
    EXIT_OK,
    EXIT_RUN_FAILED,
    EXIT_SLO_FAILED,
    EXIT_START_FAILED,
    MoptError,
    UsageError,
)
from model_optimizer.events import (
    ArchiveOpened,
    Done,
    EventCallback,
    Ready,
    StartFailed,
    Starting,
    Stopping,
    Waiting,
    quiet,
)
from model_optimizer.fsutil import disk_full
from model_optimizer.load import parse_request_rate, prompts_needed
from model_optimizer.load.figures import Figures
from model_optimizer.load.workload import prepare_items
from model_optimizer.reaper import reap_abandoned
from model_optimizer.recipe import LoadedRecipe, RecipeSpec
from model_optimizer.recipe.render import Recipe, model_location
from model_optimizer.secrets import (
    redact_url,
    secret_values,
)
from model_optimizer.signals import interrupts_deferred
from model_optimizer.window import (  # noqa: F401 - capacity and tests import them from here
    DEFAULT_MIN_SUCCESS_RATE,
    RunRecords,
    effective_slo,
    finish_metrics,
    measure_endpoint,
)

log = logging.getLogger(__name__)
NO_REQUEST_COMPLETED = "no_request_completed"
RUNTIME_FAILURES = ("engine_died", NO_REQUEST_COMPLETED, INTERNAL_ERROR, DISK_FULL)  # exit 5


@dataclass
class RunOutcome:
    """What a run produced: status, figures, failure, archive location, exit code."""

    status: str
    archive: Path
    run_id: str
    metrics: dict = field(default_factory=dict)
    telemetry_peaks: dict = field(default_factory=dict)
    failure: Failure | None = None
    ready_after_s: float | None = None
    workload: dict = field(default_factory=dict)  # as run (overrides, tied concurrency)

    @property
    def ok(self) -> bool:
        """True when the run completed (SLOs aside)."""
        return self.status == STATUS_OK

    @property
    def figures(self) -> Figures:
        """The typed view of ``metrics`` (what metrics.json holds)."""
        return Figures.of(self.metrics)

    @property
    def slo_met(self) -> bool:
        """True when the run completed and met every SLO of the recipe."""
        return self.ok and bool(self.figures.slo_met)

    @property
    def exit_code(self) -> int:
        """The CLI exit code for this outcome."""
        if self.ok:
            return EXIT_OK if self.slo_met else EXIT_SLO_FAILED
        if self.failure is not None and self.failure.kind not in RUNTIME_FAILURES:
            return EXIT_START_FAILED
        return EXIT_RUN_FAILED

    def to_dict(self) -> dict:
        """JSON-ready summary."""
        return {"status": self.status, "run_id": self.run_id, "archive": str(self.archive),
                "ready_after_s": self.ready_after_s, "metrics": self.metrics,
                "telemetry_peaks": self.telemetry_peaks,
                "failure": self.failure.to_dict() if self.failure else None}


def tied_concurrency(recipe: Recipe) -> bool:
    """True when ``workload.concurrency`` is unset in a closed loop: max_num_seqs in flight
    (effective_workload)."""
    workload = RecipeSpec.of(recipe).workload
    return workload.concurrency is None and parse_request_rate(workload.request_rate) is None


def effective_workload(recipe: Recipe, override: dict | None = None) -> dict:
    """The workload as run (the load's input; run.json): overrides applied, a null concurrency
    of a closed loop tied to max_num_seqs (the one place that rule is applied; searches and
    fakes call it). An open loop (a numeric request_rate) with a null concurrency stays
    uncapped: every arrival is sent when it is due, as ``vllm bench serve`` does; so does a
    trace (``workload.trace``), replayed at its own arrival times."""
    spec = RecipeSpec.of(recipe)
    workload = {**spec.workload.to_dict(), **(override or {})}
    closed = parse_request_rate(workload.get("request_rate", "inf")) is None
    if workload["concurrency"] is None and closed and not workload.get("trace"):
        workload["concurrency"] = spec.engine.max_num_seqs or 1
    return workload


def run_items(spec: RecipeSpec, workload: dict, tokenizer: str, base_dir: Path | None):
    """The run's requests (``LazyItems``), checked against max_model_len and slo.classes."""
    return prepare_items(workload, tokenizer, prompts_needed(workload), base_dir,
                         max_model_len=spec.engine.max_model_len,
                         classes=spec.slo.classes or {})


def archived_engine(loaded: LoadedRecipe, runs_base: str | Path, factory: EngineFactory | None,
                    kind: str, extra: dict) -> tuple[RunArchive, EngineProcess]:
    """Render the server command, create the archive (``kind``) with its start files, and
    return it with the supervised process, not yet started."""
    server = plan_server(loaded, factory)
    reap_abandoned(runs_base)
    archive = RunArchive.create(runs_base, loaded.name, kind=kind, start=lambda new: write_start(
        new, loaded, {**extra, "placement": server.placement.to_dict()},
        argv=server.command.argv, env=server.command.env))
    return archive, server.process(archive.file(ENGINE_LOG))


def check_model_present(loaded: LoadedRecipe) -> str:
    """Resolve the model location; a missing local folder is a usage error with the fix."""
    location = model_location(loaded.spec, loaded.base_dir)
    written = loaded.spec.model.path
    if Path(location).is_absolute() and not (Path(location) / "config.json").is_file():
        hint = ("build the tiny local model with `mopt tiny-model " + location + "`"
                if "tiny" in written else "check model.path")
        raise UsageError(f"{loaded.path}: model.path '{written}' resolves to {location}, "
                         f"which holds no config.json; {hint}.")
    return location


def run_recipe(loaded: LoadedRecipe, runs_base: str | Path, *,
               on_event: EventCallback | None = None,
               workload_override: dict | None = None,
               archive_extra: dict | None = None,
               engine_factory: EngineFactory | None = None,
               while_serving: Callable[[str], None] | None = None) -> RunOutcome:
    """Launch, measure and archive ``loaded``; always stop the server.

    ``workload_override`` replaces workload keys (the sweep's sustained confirmation run).
    ``engine_factory`` chooses the server process (default: vLLM; tests use the mock).
    ``while_serving(base_url)`` runs after a successful load, before the server stops (apply
    evaluates quality there without a second launch).
    Raises KeyboardInterrupt after archiving as ``interrupted`` when interrupted.
    """
    emit = on_event or quiet
    spec = loaded.spec
    workload = effective_workload(spec, workload_override)
    location = check_model_present(loaded)
    items = run_items(spec, workload, spec.model.tokenizer or location, loaded.base_dir)
    archive, engine = archived_engine(loaded, runs_base, engine_factory, "run",
                                      {"workload": workload, **(archive_extra or {})})
    measurement = RunRecords(archive, items)
    outcome = RunOutcome(STATUS_INTERRUPTED, archive.path, archive.id, workload=workload)
    emit(ArchiveOpened(archive.id, str(archive.path)))
    try:
        launch_engine(engine, archive, emit, outcome)
        if outcome.failure is None:
            _measure(engine, archive, loaded, workload, measurement, emit, outcome)
        if while_serving is not None and outcome.failure is None and engine.alive():
            while_serving(engine.base_url)
    except KeyboardInterrupt:
        outcome.status = STATUS_INTERRUPTED
        finish_metrics(measurement, workload, spec, outcome, window_s=None)
        raise
    except MoptError:
        raise  # a failure mopt explains (bad input found late): the caller reports it
    except Exception as exc:  # noqa: BLE001 - one failed run never ends a sweep or a tune
        _internal_failure(archive, outcome, exc)
    finally:
        with interrupts_deferred():
            emit(Stopping())
            engine.stop()
            scrub_log(archive.file(ENGINE_LOG), secret_values(engine.argv, engine.env_extra))
            items.close()
            _finalize(archive, loaded, outcome)
        emit(Done(outcome.to_dict()))
    return outcome


def launch_engine(engine: EngineProcess, archive: RunArchive, emit: EventCallback,
                  outcome: RunOutcome) -> None:
    emit(Starting(engine.argv))
    engine.start()
    archive.set_status("running", phase="starting", **engine.identity())
    try:
        outcome.ready_after_s = engine.wait_ready(
            on_tick=lambda elapsed: emit(Waiting(elapsed)))
    except EngineStartError as exc:
        outcome.failure = exc.failure
        outcome.status = failed_status(exc.failure.kind)
        archive.write_json(FAILURE_FILE, exc.failure.to_dict())
        emit(StartFailed(exc.failure.to_dict()))
        return
    archive.set_status("running", phase="ready", ready_after_s=outcome.ready_after_s,
                       placement_seen=engine.placement_seen)
    emit(Ready(outcome.ready_after_s))


def _measure(engine: EngineProcess, archive: RunArchive, loaded: LoadedRecipe, workload: dict,
             measurement: RunRecords, emit: EventCallback, outcome: RunOutcome) -> None:
    spec = loaded.spec
    result = measure_endpoint(
        engine.base_url, spec.model.served_name, workload, archive,
        measurement, emit, outcome, server_pid=engine.pid, placement=engine.placement,
        should_stop=lambda: None if engine.alive() else "engine died")
    failure = engine.runtime_failure()
    if failure is not None:
        outcome.failure = failure
        outcome.status = failed_status(failure.kind)
        archive.write_json(FAILURE_FILE, failure.to_dict())
    finish_metrics(measurement, workload, spec, outcome, window_s=result.window_s,
                    stopped_reason=result.stopped_reason, closed_at=result.closed_at)
    if failure is None:
        _judge_completed(archive, measurement, outcome)


def bench_endpoint(base_url: str, loaded: LoadedRecipe, model_name: str, tokenizer_dir: str,
                   runs_base: str | Path, *, on_event: EventCallback | None = None,
                   archive_extra: dict | None = None, server_pid: int | None = None,
                   workload_override: dict | None = None) -> RunOutcome:
    """Load-test an already running OpenAI-compatible server with the recipe's workload
    (``workload_override`` replaces keys of it: `mopt verify --url` re-runs a validating
    run's workload).

    Archived like a run (kind ``bench``), without an engine log or argv; ``archive_extra``
    goes into run.json (a probe-scan level names its sweep and scan server there).
    """
    emit = on_event or quiet
    spec = loaded.spec
    workload = effective_workload(spec, workload_override)
    placement = resolve_placement(spec)
    reap_abandoned(runs_base)
    items = run_items(spec, workload, tokenizer_dir, loaded.base_dir)
    shown = {"kind": "bench", "url": redact_url(base_url), "model": model_name}
    archive = RunArchive.create(runs_base, loaded.name, kind="bench", start=lambda new: write_start(
        new, loaded, {**shown, "workload": workload, "placement": placement.to_dict(),
                      **(archive_extra or {})}, argv=[], env={}))
    measurement = RunRecords(archive, items)
    outcome = RunOutcome(STATUS_INTERRUPTED, archive.path, archive.id, workload=workload)
    emit(ArchiveOpened(archive.id, str(archive.path)))
    try:
        result = measure_endpoint(base_url, model_name, workload, archive, measurement, emit,
                                  outcome, server_pid=server_pid, placement=placement)
        finish_metrics(measurement, workload, spec, outcome, window_s=result.window_s,
                        stopped_reason=result.stopped_reason, closed_at=result.closed_at)
        _judge_completed(archive, measurement, outcome)
    except KeyboardInterrupt:
        finish_metrics(measurement, workload, spec, outcome, window_s=None)
        raise
    except MoptError:
        raise  # bad input found late: the caller reports it
    except Exception as exc:  # noqa: BLE001 - a run that broke is failed, never interrupted
        _internal_failure(archive, outcome, exc)
    finally:
        items.close()
        _finalize(archive, loaded, outcome)
        emit(Done(outcome.to_dict()))
    return outcome


def _internal_failure(archive: RunArchive, outcome: RunOutcome, exc: Exception) -> None:
    """A full disk, a bug or another unexpected error during a run: an archived failure."""
    log.error("run %s failed inside mopt", archive.id, exc_info=not disk_full(exc) and exc)
    outcome.failure = exception_failure(exc)
    outcome.status = failed_status(outcome.failure.kind)
    with contextlib.suppress(OSError):
        archive.write_json(FAILURE_FILE, outcome.failure.to_dict())


def _judge_completed(archive: RunArchive, measurement: RunRecords,
                     outcome: RunOutcome) -> None:
    """Mark the run ok once its figures exist, or failed when no request completed."""
    if outcome.figures.completed:
        outcome.status = STATUS_OK
        return
    errors = list(dict.fromkeys(r.error for r in measurement.records if r.error))[:5]
    if outcome.metrics.get("stopped_reason"):  # why sending stopped (a refusing server)
        errors.append(f"load stopped: {outcome.metrics['stopped_reason']}")
    outcome.failure = Failure(NO_REQUEST_COMPLETED, "no measured request succeeded; the "
                              "errors are in requests.jsonl", errors)
    outcome.status = failed_status(NO_REQUEST_COMPLETED)
    archive.write_json(FAILURE_FILE, outcome.failure.to_dict())


@contextlib.contextmanager
def serve(loaded: LoadedRecipe, runs_base: str | Path, *,
          on_event: EventCallback | None = None, archive_extra: dict | None = None,
          engine_factory: EngineFactory | None = None):
    """Launch ``loaded``'s server, archived (kind ``server``: run.json, engine.log, status),
    and yield ``(engine, outcome)`` for loads run elsewhere (probe-scan). ``engine`` is None
    when the start failed (``outcome.failure`` says why). The server group is always stopped
    and the archive finished on exit, also on Ctrl-C."""
    emit = on_event or quiet
    check_model_present(loaded)
    archive, engine = archived_engine(loaded, runs_base, engine_factory, "server",
                                      {"kind": "server", **(archive_extra or {})})
    outcome = RunOutcome(STATUS_INTERRUPTED, archive.path, archive.id)
    emit(ArchiveOpened(archive.id, str(archive.path)))
    try:
        launch_engine(engine, archive, emit, outcome)
        yield (engine if outcome.failure is None else None), outcome
        failure = engine.runtime_failure() if outcome.failure is None else outcome.failure
        outcome.failure = failure
        outcome.status = STATUS_OK if failure is None else failed_status(failure.kind)
    finally:
        with interrupts_deferred():
            emit(Stopping())
            engine.stop()
            scrub_log(archive.file(ENGINE_LOG), secret_values(engine.argv, engine.env_extra))
            _finalize(archive, loaded, outcome)


def _finalize(archive: RunArchive, loaded: LoadedRecipe, outcome: RunOutcome) -> None:
    """Write metrics, status and report; runs in `finally`, so keep it exception-light.
    A full disk ends the run failed (``disk_full``), its status written in the room the
    archive kept for it."""
    try:
        archive.write_json(METRICS_FILE, {**outcome.metrics,
                                          "telemetry_peaks": outcome.telemetry_peaks})
        archive.write_entry(**metric_fields(outcome.metrics))
        archive.write_text(REPORT_FILE, render_run_report(archive.id, loaded.resolved, outcome))
    except OSError as exc:
        if not disk_full(exc):
            raise
        _internal_failure(archive, outcome, exc)
    finally:
        archive.set_status(outcome.status, phase="finished", finished_at=utc_now(),
                           slo_met=outcome.slo_met if outcome.ok else None,
                           failure=outcome.failure.to_dict() if outcome.failure else None)
        archive.close()
