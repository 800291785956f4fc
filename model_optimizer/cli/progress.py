"""Live progress for long commands: phase, requests done, live QPS and TTFT, steps and ETA.

Listeners of the typed events in ``model_optimizer/events.py``: they dispatch on the class.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from model_optimizer.archive.report import fmt
from model_optimizer.events import (
    ArchiveOpened,
    Event,
    Generated,
    KneeFitted,
    LmEval,
    LoadProgress,
    LoadStarted,
    ProbeFailed,
    ProbeServerStarted,
    Ready,
    Scoring,
    StartFailed,
    Starting,
    Stopping,
    SweepConfirm,
    SweepConfirmed,
    SweepSkipped,
    SweepStep,
    SweepStepDone,
    Waiting,
)

#: the events of one run (runner.run_recipe), shown by RunProgress itself
RUN_EVENTS: tuple[type[Event], ...] = (ArchiveOpened, Starting, Waiting, Ready, StartFailed,
                                       LoadStarted, LoadProgress, Stopping)


def _duration(seconds: float) -> str:
    return f"{seconds / 60:.0f} min" if seconds >= 90 else f"{seconds:.0f} s"


def eta_text(eta: float | None) -> str:
    """``, ETA 3 min`` (seconds under 90 s), or ``""`` when unknown."""
    return "" if eta is None else f", ETA {_duration(eta)}"


def steps_text(done: int, total: int | None, eta: float | None) -> str:
    """`` [2/5 done, ETA 3 min]`` for a step of work whose count is known, else ``""``."""
    return "" if total is None else f" [{done}/{total} done{eta_text(eta)}]"


def bound_text(done: int, total: int | None, eta: float | None) -> str:
    """`` [2 of at most 8 done, at most 3 min left]`` for work with an upper bound of steps
    (capacity's max_windows), else ``""``."""
    if total is None:
        return ""
    left = "" if eta is None else f", at most {_duration(eta)} left"
    return f" [{done} of at most {total} done{left}]"


class RunProgress:
    """Renders runner events as one live status line (plain lines when not a terminal)."""

    def __init__(self, console: Console, label: str = "", total: int | None = None):
        self.console = console
        self.label = label
        self.total = total
        self.live = Live(Text(""), console=console, refresh_per_second=4, transient=True)
        self.interactive = console.is_terminal

    def __enter__(self) -> RunProgress:
        if self.interactive:
            self.live.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.interactive:
            self.live.stop()

    def _show(self, text: str) -> None:
        if self.interactive:
            self.live.update(Text(f"{self.label}{text}"))

    def _log(self, text: str) -> None:
        self.console.print(f"{self.label}{text}", highlight=False, markup=False)

    def __call__(self, event: Event) -> None:
        """Runner event callback."""
        match event:
            case ArchiveOpened():
                self._log(f"archive: {event.path}")
            case Starting():
                self._log("starting vLLM ...")
            case Waiting():
                self._show(f"waiting for the server to be healthy ({event.elapsed_s:.0f} s)")
            case Ready():
                self._log(f"server healthy after {event.ready_after_s:.1f} s")
            case StartFailed():
                self._log(f"server failed to start: {event.failure['class']}")
            case LoadStarted():
                self._log("load test running (warm-up first) ...")
            case LoadProgress():
                self._show(self._progress_text(event))
            case Stopping():
                self._show("stopping the server ...")

    def _progress_text(self, event: LoadProgress) -> str:
        total = f"/{self.total}" if self.total and event.phase == "measure" else ""
        ttft = event.ttft_p50_ms
        telemetry = event.telemetry or {}
        kv = telemetry.get("kv_cache_usage_perc")
        parts = [f"{event.phase}: {event.done}{total} done",
                 f"{event.failed} failed", f"{event.in_flight} in flight",
                 f"{event.qps:.2f} req/s",
                 f"TTFT p50 {ttft:.0f} ms" if ttft is not None else "TTFT p50 -"]
        if kv is not None:
            parts.append(f"KV {kv * 100:.0f}%")
        return " | ".join(parts)


class SearchProgress(RunProgress):
    """Progress of a search (sweep, tune): its archive once, then its own phases' handlers.

    The first ``archive`` event names the search's own folder; the nested run archives that
    follow are not announced. A subclass lists its events in ``handlers()`` (by class); other
    events (the runs' own) fall back to the run display.
    """

    noun = "search"
    search_path: str | None = None

    def __call__(self, event: Event) -> None:
        if isinstance(event, ArchiveOpened):
            if self.search_path is None:
                self.search_path = event.path
                self._announce(event)
            return
        handler = self.handlers().get(type(event))
        if handler is not None:
            handler(event)
        else:
            super().__call__(event)

    def handlers(self) -> dict[type[Event], Callable[[Any], None]]:
        """The search's own event classes and what each shows (none here)."""
        return {}

    def _announce(self, event: ArchiveOpened) -> None:
        resumed = event.resumed
        note = f" (resuming: {resumed} already done)" if resumed is not None else ""
        self._log(f"{self.noun} archive: {event.path}{note}")


def run_search(run: Callable[[], Any], progress: SearchProgress, command: str,
               files: str, as_json: bool) -> None:
    """Run a search command's library call under its progress display, then report it.

    Ctrl-C names the ``--resume`` command; the outcome is printed as JSON or as the reason,
    the written recipe and the archive (with the ``files`` it holds). Always exits with the
    outcome's exit code.
    """
    from model_optimizer.cli.common import console, err_console, print_json

    try:
        with progress:
            outcome = run()
    except KeyboardInterrupt:
        if progress.search_path:
            err_console.print(f"interrupted; continue with: mopt {command} --resume "
                              f"{progress.search_path}", highlight=False, markup=False)
        raise
    if as_json:
        print_json(outcome.to_dict())
    else:
        console.print(f"\n{outcome.reason}", highlight=False, markup=False)
        if outcome.written and getattr(outcome, "resolved", True):
            console.print(f"[green]wrote {escape(str(outcome.written))}[/] "
                          "(new revision, validated)",
                          highlight=False)
        elif outcome.written:   # a sweep's or tune's choice the budget did not resolve
            console.print(f"[yellow]wrote {escape(str(outcome.written))}[/] (new revision, "
                          "written, not resolved: see the reason above; --strict "
                          "writes nothing)", highlight=False)
        console.print(f"{command} archive: {outcome.archive} ({files})", highlight=False,
                      markup=False)
    raise typer.Exit(outcome.exit_code)


class EvalProgress(RunProgress):
    """RunProgress plus the eval's own phases."""

    def __call__(self, event: Event) -> None:
        if isinstance(event, Generated):
            self._show(f"generating: {event.done}/{event.total}")
        elif isinstance(event, Scoring):
            self._show(f"scoring next-token distributions on {event.on} ...")
        elif isinstance(event, LmEval):
            self._log(f"lm-eval: {', '.join(event.tasks)} ...")
        else:
            super().__call__(event)


class SweepProgress(SearchProgress):
    """Search progress plus the sweep's own events: which step, which value, and why."""

    noun = "sweep"

    def handlers(self) -> dict[type[Event], Callable[[Any], None]]:
        """The sweep's events: each step, its result, planner skips, the confirmation."""
        return {SweepStep: self._on_step, SweepStepDone: self._on_step_done,
                SweepSkipped: self._on_skipped, SweepConfirm: self._on_confirm,
                SweepConfirmed: self._on_confirmed, ProbeServerStarted: self._on_probe_server,
                ProbeFailed: self._on_probe_failed, KneeFitted: self._on_knee}

    def _on_step(self, event: SweepStep) -> None:
        self._log(f"step {event.index}: {event.value} ({event.reason})"
                  f"{steps_text(event.done, event.total, event.eta_s)}")

    def _on_step_done(self, event: SweepStepDone) -> None:
        metric = fmt(event.metric, 2) if event.metric is not None else "-"
        if event.half_width is not None and event.metric is not None:
            metric += f" ± {event.half_width:.2f}"
        extra = f", {event.failure}" if event.failure else ""
        self._log(f"  -> {event.status}{extra}, objective {metric}")

    def _on_probe_server(self, event: ProbeServerStarted) -> None:
        self._log(f"{event.strategy}: one server at max_num_seqs={event.max_num_seqs}, the "
                  "concurrency scanned on it")

    def _on_probe_failed(self, event: ProbeFailed) -> None:
        self._log(event.reason)

    def _on_skipped(self, event: SweepSkipped) -> None:
        self._log(f"  skipped {event.value} without a launch: {event.reason}")

    def _on_knee(self, event: KneeFitted) -> None:
        self._log(f"fitted knee: {event.verdict}")

    def _on_confirm(self, event: SweepConfirm) -> None:
        self._log(f"confirming {event.value} with a {event.duration_s:.0f} s sustained run")

    def _on_confirmed(self, event: SweepConfirmed) -> None:
        verdict = "passed" if event.ok else "rejected: " + "; ".join(event.problems)
        if event.shortfall:
            verdict += f"; NOT RESOLVED: {event.shortfall}"
        self._log(f"  -> {verdict}")
