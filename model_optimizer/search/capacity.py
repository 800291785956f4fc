"""`mopt capacity`: the highest Poisson arrival rate a deployment carries within its SLOs.

One live server (launched from the recipe, or already running at ``--url``) measures a
window per offered rate; ``load.rate_search`` picks the rates (bracket, then bisection).
Each window is an open-loop load of ``capacity.window_s`` seconds of Poisson arrivals (no
in-flight cap unless ``workload.concurrency`` sets one) after the recipe's warm-up requests,
with fresh prompts (one sequence for the whole search, each window continuing it). A window
whose requests are still running ``OVERRUN_FACTOR`` x ``window_s`` after it opened is cut:
the requests still in flight are cancelled and count as failed (the server fell behind).

Archived as one run folder of kind ``capacity``: every request (``requests.jsonl``, each
with its ``window`` and offered ``rate``), ``windows.jsonl`` (one judged window per line),
``metrics.json`` (the capacity window's figures plus ``capacity``), ``report.md``.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path

from model_optimizer.archive import STATUS_INTERRUPTED, STATUS_OK, RunArchive, failed_status
from model_optimizer.archive.entry import metric_fields
from model_optimizer.archive.names import (
    ENGINE_LOG,
    METRICS_FILE,
    REPORT_FILE,
    REQUESTS_FILE,
    WINDOWS_FILE,
)
from model_optimizer.archive.report import fmt
from model_optimizer.archive.start import scrub_log, write_start
from model_optimizer.engine.factory import EngineCommand, EngineFactory, plan_server
from model_optimizer.engine.placement import resolve_placement
from model_optimizer.errors import EXIT_OK, EXIT_RUN_FAILED, EXIT_SLO_FAILED, EXIT_START_FAILED
from model_optimizer.events import (
    ArchiveOpened,
    Done,
    Event,
    EventCallback,
    LoadProgress,
    Stopping,
    WindowDone,
    WindowStarted,
    eta_s,
    quiet,
)
from model_optimizer.load.rate_search import RateSearchConfig, RateStep, judge, next_rate, summary
from model_optimizer.load.sizing import size
from model_optimizer.load.workload import ItemsFrom
from model_optimizer.reaper import reap_abandoned
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.runner import (
    RunOutcome,
    RunRecords,
    check_model_present,
    finish_metrics,
    launch_engine,
    measure_endpoint,
    run_items,
)
from model_optimizer.secrets import redact_url, secret_values
from model_optimizer.signals import interrupts_deferred

OVERRUN_FACTOR = 1.5
#: fraction of the sustainable rate each server keeps free when sizing a fleet
DEFAULT_HEADROOM = 0.2
WINDOW_FIGURES = ("qps", "goodput_qps", "output_tok_s", "completed", "failed", "ttft_p50_ms",
                  "ttft_p99_ms", "tpot_p50_ms", "e2e_p99_ms", "slo_violations", "window_s")


@dataclass
class CapacityOutcome:
    """What a capacity search found."""

    status: str
    archive: Path
    run_id: str
    result: dict = field(default_factory=dict)
    failure: object | None = None

    @property
    def exit_code(self) -> int:
        """0: a passing rate was found; 4: none passed; 3/5: the server failed."""
        if self.status == STATUS_OK:
            return EXIT_OK if self.result.get("capacity_rps") is not None else EXIT_SLO_FAILED
        return EXIT_START_FAILED if self.status.startswith("failed:") and \
            self.status != failed_status("engine_died") else EXIT_RUN_FAILED

    def to_dict(self) -> dict:
        """JSON-ready summary."""
        return {"status": self.status, "run_id": self.run_id, "archive": str(self.archive),
                **self.result}


class _WindowMeasurement(RunRecords):
    """Records of one window, archived with the window number and offered rate."""

    def __init__(self, archive: RunArchive, items, window: int, rate: float):
        super().__init__(archive, items)
        self.window, self.rate = window, rate

    def on_record(self, record) -> None:
        self.archive.append_jsonl(REQUESTS_FILE,
                                  {**record.to_dict(), "window": self.window, "rate": self.rate})
        if not record.warmup:
            self.records.append(record)


def window_workload(workload: dict, rate: float, config: RateSearchConfig, index: int) -> dict:
    """The workload of window ``index``: Poisson at ``rate`` for ``window_s`` seconds.

    The arrival seed differs per window (the workload seed plus ``index``). Only the first
    window warms up until steady (``warmup_steady_max_s``): the later ones find the server
    warm.
    """
    steady = workload.get("warmup_steady_max_s") if index == 0 else None
    return {**workload, "request_rate": rate, "num_requests": None, "warmup_steady_max_s": steady,
            "duration_s": config.window_s, "seed": int(workload.get("seed") or 0) + index}


def run_capacity(loaded: LoadedRecipe, runs_base: str | Path, *, url: str | None = None,
                 model_name: str | None = None, tokenizer_dir: str | None = None,
                 on_event: EventCallback | None = None,
                 engine_factory: EngineFactory | None = None,
                 target_rate: float | None = None, headroom: float = DEFAULT_HEADROOM
                 ) -> CapacityOutcome:
    """Search the capacity of ``loaded`` on one server (launched unless ``url`` is given;
    ``engine_factory`` chooses the server process, vLLM by default); the answer is sized
    for ``target_rate`` req/s with ``headroom`` and priced from ``hardware.price_per_hour``
    (``result["sizing"]``, see ``load.sizing``)."""
    emit = on_event or quiet
    recipe = loaded.resolved
    config = RateSearchConfig(**loaded.spec.capacity.model_dump())
    engine = None
    if url is None:
        location = check_model_present(loaded)
        tokenizer_dir = recipe["model"].get("tokenizer") or location
        model_name = recipe["model"]["served_name"]
    items = run_items(loaded.spec, window_workload(recipe["workload"], config.start_rate,
                                                   config, 0), tokenizer_dir, loaded.base_dir)
    server = plan_server(loaded, engine_factory) if url is None else None
    reap_abandoned(runs_base)
    command = server.command if server else EngineCommand([], {})
    archive = RunArchive.create(runs_base, loaded.name, kind="capacity", start=lambda new: (
        write_start(new, loaded,
                    {"kind": "capacity", "url": redact_url(server.base_url if server else url),
                     "model": model_name, "tokenizer": tokenizer_dir,
                     "capacity": config.__dict__, "workload": recipe["workload"]},
                    argv=command.argv, env=command.env)))
    if server is not None:
        engine, url = server.process(archive.file(ENGINE_LOG)), server.base_url
    outcome = CapacityOutcome(STATUS_INTERRUPTED, archive.path, archive.id)
    emit(ArchiveOpened(archive.id, str(archive.path)))
    steps: list[RateStep] = []
    try:
        if engine is not None:
            scratch = RunOutcome(STATUS_INTERRUPTED, archive.path, archive.id)
            launch_engine(engine, archive, emit, scratch)
            if scratch.failure is not None:
                outcome.status, outcome.failure = scratch.status, scratch.failure
                return outcome
        _search(archive, loaded, url, model_name, config, items, engine, steps, emit)
        outcome.status = STATUS_OK
        if engine is not None and (failure := engine.runtime_failure()) is not None:
            outcome.status, outcome.failure = failed_status(failure.kind), failure
    finally:
        with interrupts_deferred():
            items.close()
            if engine is not None:
                emit(Stopping())
                engine.stop()
                scrub_log(archive.file(ENGINE_LOG),
                          secret_values(engine.argv, engine.env_extra))
            outcome.result = summary(config, steps)
            outcome.result["sizing"] = size(outcome.result, target_rate, headroom,
                                            loaded.spec.hardware.price_per_hour).to_dict()
            _finalize(archive, loaded, outcome, steps)
        emit(Done(outcome.to_dict()))
    return outcome


def _search(archive, loaded, url, model_name, config, items, engine, steps, emit) -> None:
    """Measure and judge windows until the strategy stops (every prompt from ``items``)."""
    recipe = loaded.resolved
    placement = engine.placement if engine is not None else resolve_placement(loaded.spec)
    sent, started = 0, time.monotonic()
    while (rate := next_rate(config, steps)) is not None:
        index = len(steps)
        workload = window_workload(recipe["workload"], rate, config, index)
        emit(WindowStarted(index, rate, config.max_windows,
                           eta_s(time.monotonic() - started, index, config.max_windows)))
        measurement = _WindowMeasurement(archive, ItemsFrom(items, sent), index, rate)
        window = RunOutcome(STATUS_OK, archive.path, archive.id, workload=workload)
        opened: list[float] = []

        def track(event: Event, opened=opened) -> None:
            if isinstance(event, LoadProgress) and event.phase == "measure" and not opened:
                opened.append(time.monotonic())
            emit(event)

        def should_stop(opened=opened) -> str | None:
            if engine is not None and not engine.alive():
                return "engine died"
            if opened and time.monotonic() - opened[0] > OVERRUN_FACTOR * config.window_s:
                return "window overran: the server fell behind the offered rate"
            return None
        result = measure_endpoint(url, model_name, workload, archive, measurement, track,
                                  window, server_pid=engine.pid if engine else None,
                                  should_stop=should_stop, placement=placement)
        sent += len(result.records) + len(result.warmup_records)
        finish_metrics(measurement, workload, recipe, window, result.window_s,
                        result.stopped_reason)
        passed, reason = judge(rate, window.metrics, config.min_goodput_fraction,
                               config.window_s, sent=len(result.records))
        figures = {key: window.metrics.get(key) for key in WINDOW_FIGURES}
        figures["classes"] = window.metrics.get("classes")
        figures["stopped_reason"] = result.stopped_reason
        figures["preemptions"] = window.telemetry_peaks.get("preemptions")
        figures["kv_cache_usage_max"] = window.telemetry_peaks.get("kv_cache_usage_perc_max")
        steps.append(RateStep(rate, passed, reason, figures))
        archive.append_jsonl(WINDOWS_FILE, {"window": index, "rate": rate,
                                               "passed": passed, "reason": reason, **figures})
        emit(WindowDone(index, rate, passed, reason))
        if result.stopped_reason == "engine died":
            return


def _finalize(archive: RunArchive, loaded: LoadedRecipe, outcome: CapacityOutcome,
              steps: list[RateStep]) -> None:
    """metrics.json (the capacity window's figures + the search), report.md, status."""
    try:
        best = next((s for s in steps if s.rate == outcome.result.get("capacity_rps")), None)
        figures = dict(best.figures) if best else {}
        archive.write_json(METRICS_FILE, {**figures, "capacity": outcome.result})
        archive.write_entry(**metric_fields(figures))
        archive.write_text(REPORT_FILE, render_capacity_report(archive.id, loaded, outcome))
    finally:
        with contextlib.suppress(Exception):
            archive.set_status(outcome.status, phase="finished",
                               capacity_rps=outcome.result.get("capacity_rps"))
        archive.close()


def render_capacity_report(run_id: str, loaded: LoadedRecipe, outcome: CapacityOutcome) -> str:
    """report.md of a capacity search: the answer first, then every window."""
    result = outcome.result
    slo = {k: v for k, v in loaded.resolved["slo"].items() if v is not None}
    capacity = result.get("capacity_rps")
    answer = (f"**{capacity:.3g} req/s** within the SLOs" if capacity is not None
              else "**no rate tried met the SLOs**")
    lines = [f"# Capacity {run_id}", "", f"- recipe: **{loaded.name}** revision "
             f"{loaded.resolved['revision']}", f"- status: **{outcome.status}**",
             f"- capacity: {answer}; first failing rate: "
             f"{fmt(result.get('first_failing_rps'), 3)} req/s",
             f"- SLOs: {slo or 'none'}", f"- stop: {result.get('stop_reason')}",
             *sizing_lines(result.get("sizing")), "",
             "| window | offered req/s | passed | goodput | req/s | TTFT p99 ms | why |",
             "|---:|---:|---|---:|---:|---:|---|"]
    for index, step in enumerate(result.get("steps", [])):
        lines.append(f"| {index} | {step['rate']:.3g} | {'yes' if step['passed'] else 'no'} | "
                     f"{fmt(step.get('goodput_qps'), 2)} | {fmt(step.get('qps'), 2)} | "
                     f"{fmt(step.get('ttft_p99_ms'))} | {step['reason']} |")
    return "\n".join(lines) + "\n"


def sizing_lines(sizing: dict | None) -> list[str]:
    """The fleet answer (``load.sizing``) as report lines: limit, replicas, cost."""
    if not sizing:
        return []
    lines = [f"- binding limit: {sizing['binding_limit']}"]
    if sizing.get("target_rps"):
        lines.append(f"- replicas for {sizing['target_rps']:g} req/s with "
                     f"{sizing['headroom']:.0%} headroom, each server carrying "
                     f"{fmt(sizing['per_server_rps'], 3)} req/s as measured: "
                     f"**{fmt(sizing['replicas'])}** "
                     f"(if capacity were the first failing rate: "
                     f"{fmt(sizing['replicas_optimistic'])})")
    if sizing.get("cost_per_hour") is not None:
        lines.append(f"- cost: {sizing['cost_per_hour']:.4g} per hour, "
                     f"{fmt(sizing['cost_per_million_output_tokens'], 4)} per million output "
                     f"tokens (hardware.price_per_hour {sizing['price_per_hour']:g})")
    else:
        lines.append("- cost: set hardware.price_per_hour in the recipe to get it")
    return lines
