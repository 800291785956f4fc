"""Live progress for long commands: phase, requests done, live QPS and TTFT."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console
from rich.live import Live
from rich.markup import escape
from rich.text import Text


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

    def __call__(self, phase: str, data: dict) -> None:
        """Runner event callback."""
        if phase == "archive":
            self._log(f"archive: {data['path']}")
        elif phase == "starting":
            self._log("starting vLLM ...")
        elif phase == "waiting":
            self._show(f"waiting for the server to be healthy ({data['elapsed_s']:.0f} s)")
        elif phase == "ready":
            self._log(f"server healthy after {data['ready_after_s']:.1f} s")
        elif phase == "start_failed":
            self._log(f"server failed to start: {data['class']}")
        elif phase == "load":
            self._log("load test running (warm-up first) ...")
        elif phase == "progress":
            self._show(self._progress_text(data))
        elif phase == "stopping":
            self._show("stopping the server ...")

    def _progress_text(self, data: dict) -> str:
        total = f"/{self.total}" if self.total and data.get("phase") == "measure" else ""
        ttft = data.get("ttft_p50_ms")
        telemetry = data.get("telemetry") or {}
        kv = telemetry.get("kv_cache_usage_perc")
        parts = [f"{data.get('phase', '')}: {data.get('done', 0)}{total} done",
                 f"{data.get('failed', 0)} failed", f"{data.get('in_flight', 0)} in flight",
                 f"{data.get('qps', 0):.2f} req/s",
                 f"TTFT p50 {ttft:.0f} ms" if ttft is not None else "TTFT p50 -"]
        if kv is not None:
            parts.append(f"KV {kv * 100:.0f}%")
        return " | ".join(parts)


class SearchProgress(RunProgress):
    """Progress of a search (sweep, tune): its archive once, then its own phases' handlers.

    The first ``archive`` event names the search's own folder; the nested run archives that
    follow are not announced. A subclass lists its phases in ``handlers()``; other phases
    (the runs' own) fall back to the run display.
    """

    noun = "search"
    search_path: str | None = None

    def __call__(self, phase: str, data: dict) -> None:
        if phase == "archive":
            if self.search_path is None:
                self.search_path = data["path"]
                self._announce(data)
            return
        handler = self.handlers().get(phase)
        if handler is not None:
            handler(data)
        else:
            super().__call__(phase, data)

    def handlers(self) -> dict[str, Callable[[dict], None]]:
        """The search's own phases and what each shows (none here)."""
        return {}

    def _announce(self, data: dict) -> None:
        resumed = data.get("resumed")
        note = f" (resuming: {resumed} already done)" if resumed is not None else ""
        self._log(f"{self.noun} archive: {data['path']}{note}")


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
        if outcome.written:
            console.print(f"[green]wrote {escape(str(outcome.written))}[/] "
                          "(new revision, validated)",
                          highlight=False)
        console.print(f"{command} archive: {outcome.archive} ({files})", highlight=False,
                      markup=False)
    raise typer.Exit(outcome.exit_code)
