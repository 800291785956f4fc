"""Async streaming load generator for OpenAI-compatible servers (vLLM first).

One ``aiohttp`` session sends streamed ``/v1/completions`` or ``/v1/chat/completions``
requests and stamps every socket read (``load.clock``: each request keeps its worst event-loop
lag, the client's resolution). What one request measures is defined in ``load.stream``.

Load shapes: warm-up requests first (closed loop, excluded from the measurement, passed to
``on_record`` with ``warmup=True``), then, with ``warmup_steady_max_s``, more warm-up until
throughput is steady (``load.warmup``; with a ``card`` gate, until the GPU is steady too), then
the measured window:

- ``request_rate: inf``: closed loop keeping ``concurrency`` requests in flight (None -> 1).
- a number: open loop with seeded Poisson arrivals at that rate, capped at ``concurrency`` in
  flight when it is set (a capped arrival waits for a free slot), uncapped when it is None.
- a trace (``prompts.replay``, ``load.replay``): each request sent at its own offset after
  the window opens (capped at ``concurrency`` when set); sending ends with the trace
  (``duration_s`` does not apply), and the warm-up sends the replay's own warm-up prompts.

The window opens when the first measured request is sent and closes when the last finishes:
``num_requests`` and ``duration_s`` bound only the *sending*; requests in flight at the
deadline run to completion (or their timeout) and count. All times are wall-clock epoch
seconds from one anchor of the event loop's monotonic clock. Prompts are consumed in order
(warm-up first), cycling when the list runs out (``prompts_needed`` says how many to make).
A server refusing requests (HTTP 429, Retry-After) pauses the sending (``load.backoff``).
"""

from __future__ import annotations

import asyncio
import bisect
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from model_optimizer.load.backoff import Backoff
from model_optimizer.load.clock import Clock, LoopLag, parse_request_rate
from model_optimizer.load.stats import percentile
from model_optimizer.load.steady import qps_precision
from model_optimizer.load.stream import (
    ERROR_BODY_CHARS,
    RequestRecord,
    SSEParser,
    StreamError,
    StreamState,
    api_url,
    build_payload,
    check_complete,
    error_text,
    fill_timings,
    idle_error,
    idle_timeout,
)
from model_optimizer.load.warmup import CardGate, SteadyWarmup
from model_optimizer.load.workload import WorkItem, api_headers, header_secrets, prompts_needed

PROGRESS_INTERVAL_S = 0.5
DEFAULT_MAX_DURATION_S = 120.0
STOP_POLL_INTERVAL_S = 0.1

RecordCallback = Callable[["RequestRecord"], None]
StopCallback = Callable[[], Any]
ProgressCallback = Callable[[dict], None]

# Defined in load.stream and load.workload; imported from here by load/__init__ and tests
__all__ = ["LoadResult", "RequestRecord", "build_payload", "parse_request_rate",
           "prompts_needed", "run_load", "run_load_sync"]
_SSEParser, _StreamError, _StreamState = SSEParser, StreamError, StreamState  # older names


@dataclass
class LoadResult:
    """Records of one load run and its measured window (wall-clock epoch seconds)."""

    records: list[RequestRecord]
    warmup_records: list[RequestRecord]
    window_start: float | None
    window_end: float | None
    window_s: float | None
    stopped_reason: str | None = None
    closed_at: float | None = None   # when sending stopped: the steady window's close
    client_lag: dict[str, float | None] | None = None  # LoopLag.summary of the window
    warmup: dict[str, Any] | None = None  # SteadyWarmup.summary, when it ran


class _LoadRun:
    """State of one ``run_load`` call: dispatching, in-flight tasks, records, stop."""

    def __init__(self, base_url: str, model: str, workload: Mapping[str, Any],
                 prompts: Sequence[Any], on_record: RecordCallback | None,
                 should_stop: StopCallback | None, on_progress: ProgressCallback | None,
                 on_measure_start: Callable[[], None] | None = None,
                 card: CardGate | None = None):
        if not prompts:
            raise ValueError("run_load needs at least one prompt")
        if workload.get("num_requests") is None and workload.get("duration_s") is None:
            raise ValueError("workload needs num_requests or duration_s")
        self.workload = workload
        self.model = model
        self.prompts = prompts
        self.replay = getattr(prompts, "replay", None)  # a trace's schedule (load.replay)
        self.url = api_url(base_url, workload.get("endpoint", "completions"))
        self.headers = api_headers(workload, base_url)  # Bearer, or Basic from the URL
        self.chat = workload.get("endpoint", "completions") == "chat"
        self.rate = parse_request_rate(workload.get("request_rate", "inf"))
        self.concurrency = workload.get("concurrency")
        if self.concurrency is None and self.rate is None and self.replay is None:
            self.concurrency = 1  # a closed loop without a concurrency (a trace is open)
        self.timeout_s = float(workload.get("request_timeout_s") or 300)
        self.idle_s = idle_timeout(workload)
        self.warmup_count = int(workload.get("warmup_requests") or 0)
        self.warmup_steady_s = workload.get("warmup_steady_max_s")
        self.warmup: SteadyWarmup | None = None
        self.card = card  # waited for during the steady warm-up (load.warmup)
        self.warmup_deadline_perf: float | None = None
        self.on_record, self.should_stop, self.on_progress = on_record, should_stop, on_progress
        self.clock = Clock()
        self.lag = LoopLag(self.clock.perf)
        self.on_measure_start = on_measure_start
        self.backoff = Backoff(self.clock.perf)  # HTTP 429 / Retry-After (load.backoff)
        self.session: aiohttp.ClientSession | None = None
        self.semaphore: asyncio.Semaphore | None = None
        self.tasks: set[asyncio.Task] = set()
        self.dispatcher: asyncio.Task | None = None
        self.records: list[RequestRecord] = []
        self.warmup_records: list[RequestRecord] = []
        self.stop_reason: str | None = None
        self.interrupted = False
        self.callback_error: BaseException | None = None
        self.phase = "warmup"
        self.phase_start_perf = self.clock.perf()
        self.window_start_perf: float | None = None
        self.deadline_perf: float | None = None
        self.closed_perf: float | None = None
        self.last_finish_perf: float | None = None
        self.sorted_ttft_s: list[float] = []

    # ----- running -------------------------------------------------------------------------

    async def run(self) -> LoadResult:
        """Warm up, measure, and return the result (see the module docstring)."""
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)
        timeout = aiohttp.ClientTimeout(total=None, sock_read=self.idle_s)  # idle bound
        async with aiohttp.ClientSession(connector=connector, timeout=timeout, trust_env=False,
                                         headers=self.headers) as session:
            self.session = session
            monitors = [asyncio.create_task(self._monitor()), asyncio.create_task(self.lag.run())]
            try:
                await self._run_phases()
            except BaseException:
                self.interrupted = True
                await self._cancel_all()
                raise
            finally:
                for monitor in monitors:
                    monitor.cancel()
                await asyncio.wait(monitors)  # a Ctrl-C (a cancel of this task) is not swallowed
        self._emit_progress()
        if self.callback_error is not None:
            raise self.callback_error
        return self._result()

    async def _run_phases(self) -> None:
        if self.warmup_count:
            await self._phase(warmup=True, count=self.warmup_count, rate=None, deadline=None)
        if self.warmup_steady_s and self.stop_reason is None:  # then until steady
            self.warmup = SteadyWarmup(self.clock.perf(), float(self.warmup_steady_s),
                                       card=self.card)
            await self._phase(warmup=True, count=None, rate=None, deadline=None)
        if self.stop_reason is not None:
            return
        self.phase = "measure"
        if self.on_measure_start is not None:  # nothing in flight: the server's counters
            self.on_measure_start()             # now hold exactly the warm-up
        self.phase_start_perf = self.window_start_perf = self.clock.perf()
        duration_s = self.workload.get("duration_s")
        if self.workload.get("target_half_width") and duration_s is not None:
            duration_s = self.workload.get("max_duration_s") or DEFAULT_MAX_DURATION_S
        if duration_s is not None and self.replay is None:
            self.deadline_perf = self.window_start_perf + float(duration_s)
        count = self.workload.get("num_requests")
        if self.replay is not None:
            count = len(self.replay.offsets)
        await self._phase(warmup=False, count=count, rate=self.rate,
                          deadline=self.deadline_perf)

    def _precise_enough(self) -> bool:
        """With target_half_width: the minimum duration passed and the QPS interval is tight."""
        target, minimum = self.workload.get("target_half_width"), self.workload.get("duration_s")
        if not target or minimum is None or self.window_start_perf is None:
            return False
        now = self.clock.perf()
        if now - self.window_start_perf < float(minimum):
            return False
        precision = qps_precision(self.records, self.clock.wall(now))
        return precision is not None and precision <= float(target)

    async def _phase(self, warmup: bool, count: int | None, rate: float | None,
                     deadline: float | None) -> None:
        """Dispatch one phase and wait until its last request finished."""
        limit = self.concurrency if not warmup else (self.concurrency or 1)
        self.semaphore = asyncio.Semaphore(limit) if limit else None
        self.dispatcher = asyncio.create_task(self._dispatch(warmup, count, rate, deadline))
        await asyncio.wait({self.dispatcher})
        if not self.dispatcher.cancelled() and self.dispatcher.exception() is not None:
            raise self.dispatcher.exception()
        while self.tasks:
            await asyncio.wait(set(self.tasks))

    async def _dispatch(self, warmup: bool, count: int | None, rate: float | None,
                        deadline: float | None) -> None:
        """Launch requests: closed loop (rate None) or seeded Poisson arrivals."""
        rng = random.Random(self.workload.get("seed", 0))
        next_arrival = self.clock.perf()
        index = 0
        while count is None or index < count:
            deadline = self.warmup_deadline_perf if warmup else self.deadline_perf
            if self.replay is not None and not warmup:  # the trace's own arrival times
                next_arrival = self.window_start_perf + self.replay.offsets[index]
                await asyncio.sleep(max(0.0, next_arrival - self.clock.perf()))
            elif rate is not None:
                if index:
                    next_arrival += rng.expovariate(rate)
                wake = next_arrival if deadline is None else min(next_arrival, deadline)
                await asyncio.sleep(max(0.0, wake - self.clock.perf()))
            if self.semaphore is not None:
                await self.semaphore.acquire()
            if await self.backoff.pause(self.warmup_deadline_perf if warmup
                                        else self.deadline_perf):
                next_arrival = max(next_arrival, self.clock.perf())  # no burst after a pause
            deadline = self.warmup_deadline_perf if warmup else self.deadline_perf
            if deadline is not None and self.clock.perf() >= deadline:
                if self.semaphore is not None:
                    self.semaphore.release()
                self.closed_perf = deadline
                return
            self._launch(index, warmup)
            if not warmup:
                self.closed_perf = self.clock.perf()
            index += 1

    def _launch(self, index: int, warmup: bool) -> None:
        position = index if warmup else self.warmup_count + index
        if self.replay is not None:  # the trace's requests, never cycled; its own warm-ups
            prompt = self.replay.warmup_item(index) if warmup else self.prompts[index]
        else:
            prompt = self.prompts[position % len(self.prompts)]
        # sent now, inside the deadline just checked (its task may first run after the close)
        task = asyncio.create_task(self._request_task(index, warmup, prompt,
                                                      self.clock.perf()))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _request_task(self, index: int, warmup: bool, prompt: Any,
                            sent_perf: float) -> None:
        semaphore = self.semaphore
        try:
            record = await self._send(index, warmup, prompt, sent_perf)
        finally:
            if semaphore is not None:
                semaphore.release()
        self._deliver(record)

    # ----- one request ---------------------------------------------------------------------

    async def _send(self, index: int, warmup: bool, prompt: Any,
                    sent_perf: float) -> RequestRecord:
        """Send one streamed request dispatched at ``sent_perf``; a failure is a failed record."""
        payload = build_payload(self.model, self.workload, prompt)
        record = RequestRecord(index=index, warmup=warmup, sent_at=self.clock.wall(sent_perf))
        if isinstance(prompt, WorkItem):
            record.request_class = prompt.request_class
        record.requested_output_tokens = payload.get("max_tokens",
                                                     payload.get("max_completion_tokens"))
        state = StreamState(chat=self.chat, sent_perf=sent_perf,
                            requested=record.requested_output_tokens)
        try:
            async with asyncio.timeout(self.timeout_s):
                await self._post(payload, record, state)
        except asyncio.CancelledError:
            if self.stop_reason is None or self.interrupted:
                raise
            current = asyncio.current_task()
            if current is not None:
                current.uncancel()
            record.error = f"cancelled: {self.stop_reason}"
        except aiohttp.ServerTimeoutError:  # sock_read: no byte for idle_s seconds
            record.error = idle_error(self.idle_s or 0.0)
        except TimeoutError:
            record.error = f"timeout after {self.timeout_s:g} s"
        except StreamError as exc:
            record.error = str(exc)
        except (aiohttp.ClientError, OSError, ValueError) as exc:
            record.error = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # noqa: BLE001 - every failure is a classified record
            record.error = f"unexpected {type(exc).__name__}: {str(exc)[:ERROR_BODY_CHARS]}"
        finish_perf = self.clock.perf()
        record.finished_at = self.clock.wall(finish_perf)
        record.read_lag_s = self.lag.worst_between(sent_perf, finish_perf)
        if not warmup:
            self.last_finish_perf = finish_perf
        fill_timings(record, state, header_secrets(self.headers))
        return record

    async def _post(self, payload: dict, record: RequestRecord, state: StreamState) -> None:
        assert self.session is not None
        async with self.session.post(self.url, json=payload,
                                     allow_redirects=False) as response:
            record.status = response.status
            if 300 <= response.status < 400:
                record.error = (f"HTTP {response.status}: redirect to "
                                f"{response.headers.get('Location', '?')!r} not followed")
                return
            if response.status != 200:
                self.backoff.refused(response.status, response.headers)
                record.error = f"HTTP {response.status}: {await error_text(response)}"
                return
            parser = SSEParser(max_bytes=state.max_bytes)
            async for data in response.content.iter_any():
                now_perf, before = self.clock.perf(), len(state.chunk_offsets_s)
                for event in parser.feed(data):
                    state.handle(event, now_perf)
                if record.warmup and self.warmup is not None:
                    self.warmup.streamed(len(state.chunk_offsets_s) - before, now_perf)
                if state.done:
                    break
            if not state.done:
                for event in parser.finish():
                    state.handle(event, self.clock.perf())
        check_complete(record, state)

    # ----- delivery, stop, progress --------------------------------------------------------

    def _deliver(self, record: RequestRecord) -> None:
        (self.warmup_records if record.warmup else self.records).append(record)
        if record.ok:
            self.backoff.succeeded()
        if record.ok and not record.warmup and record.ttft_s is not None:
            bisect.insort(self.sorted_ttft_s, record.ttft_s)
        if self.on_record is None:
            return
        try:
            self.on_record(record)
        except Exception as exc:  # surfaced by run() once everything has stopped
            if self.callback_error is None:
                self.callback_error = exc
                self._request_stop(f"on_record raised {type(exc).__name__}")

    def _request_stop(self, reason: str) -> None:
        if self.stop_reason is not None:
            return
        self.stop_reason = reason
        if self.dispatcher is not None:
            self.dispatcher.cancel()
        for task in list(self.tasks):
            task.cancel()

    async def _cancel_all(self) -> None:
        pending = [task for task in [self.dispatcher, *self.tasks] if task is not None]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    async def _monitor(self) -> None:
        """Poll ``should_stop`` about every 0.1 s; report progress about twice a second."""
        last_progress = self.clock.perf()
        while True:
            await asyncio.sleep(STOP_POLL_INTERVAL_S)
            if self.should_stop is not None and self.stop_reason is None:
                self._poll_should_stop()
            if (self.phase == "warmup" and self.warmup is not None
                    and self.warmup_deadline_perf is None and self.warmup.done(self.clock.perf())):
                self.warmup_deadline_perf = self.clock.perf()
            if self.stop_reason is None and (refusing := self.backoff.give_up_reason()):
                self._request_stop(refusing)
            if self.clock.perf() - last_progress >= PROGRESS_INTERVAL_S:
                last_progress = self.clock.perf()
                self._emit_progress()
                if self.phase == "measure" and self._precise_enough():
                    self.deadline_perf = self.clock.perf()

    def _poll_should_stop(self) -> None:
        try:
            reason = self.should_stop()
        except Exception as exc:  # surfaced by run() once everything has stopped
            self.callback_error = self.callback_error or exc
            reason = f"should_stop raised {type(exc).__name__}"
        if reason:
            self._request_stop(reason if isinstance(reason, str) else "stopped")

    def _emit_progress(self) -> None:
        if self.on_progress is None:
            return
        try:
            self.on_progress(self.snapshot())
        except Exception as exc:  # surfaced by run() once everything has stopped
            if self.callback_error is None:
                self.callback_error = exc
                self._request_stop(f"on_progress raised {type(exc).__name__}")

    def snapshot(self) -> dict[str, Any]:
        """Live figures: phase, done/failed/in-flight counts, elapsed, qps, ttft p50."""
        records = self.warmup_records if self.phase == "warmup" else self.records
        done = sum(1 for record in records if record.ok)
        elapsed_s = self.clock.perf() - self.phase_start_perf
        ttft_p50_ms = None
        if self.sorted_ttft_s and self.phase == "measure":
            ttft_p50_ms = percentile(self.sorted_ttft_s, 50) * 1000.0
        return {
            "phase": self.phase,
            "done": done,
            "failed": len(records) - done,
            "in_flight": len(self.tasks),
            "elapsed_s": elapsed_s,
            "qps": done / elapsed_s if elapsed_s > 0 else 0.0,
            "ttft_p50_ms": ttft_p50_ms,
            "stopped_reason": self.stop_reason,
        }

    def _result(self) -> LoadResult:
        start = end = window_s = closed = None
        if self.closed_perf is not None:
            closed = self.clock.wall(self.closed_perf)
        if self.window_start_perf is not None:
            end_perf = self.last_finish_perf or self.window_start_perf
            start = self.clock.wall(self.window_start_perf)
            end = self.clock.wall(end_perf)
            window_s = end_perf - self.window_start_perf
        lag = None
        if self.window_start_perf is not None:
            lag = self.lag.summary(self.window_start_perf, self.clock.perf())
        return LoadResult(records=self.records, warmup_records=self.warmup_records,
                          window_start=start, window_end=end, window_s=window_s,
                          stopped_reason=self.stop_reason, closed_at=closed, client_lag=lag,
                          warmup=self._warmup_summary())

    def _warmup_summary(self) -> dict[str, Any] | None:
        if self.warmup is None:
            return None
        end = self.warmup.decided_at if self.warmup.decided_at is not None else self.clock.perf()
        return self.warmup.summary(self.lag.worst_between(self.warmup.start, end))


async def run_load(
    base_url: str,
    model: str,
    workload: Mapping[str, Any],
    prompts: Sequence[Any],
    *,
    on_record: RecordCallback | None = None,
    should_stop: StopCallback | None = None,
    on_progress: ProgressCallback | None = None,
    on_measure_start: Callable[[], None] | None = None,
    card: CardGate | None = None,
) -> LoadResult:
    """Run the recipe's ``workload`` against ``base_url`` and return every record.

    ``prompts`` are strings (completions; for chat they become one user message) or chat
    message lists. ``on_record`` gets each finished request at once (warm-ups included, flagged
    ``warmup``). ``should_stop`` is polled about every 0.1 s; a truthy return (a reason string)
    stops sending, cancels in-flight requests (recorded as failed, ``cancelled: <reason>``)
    and returns with ``stopped_reason`` set. ``on_progress`` gets ``snapshot()`` dicts about
    twice a second. ``on_measure_start`` runs (blocking, briefly) when the measured window
    opens, after the warm-up drained. ``card``: with ``warmup_steady_max_s``, the steady
    warm-up also waits for it (``load.warmup.CardGate``). Request failures become failed
    records; cancellation of the caller propagates after cancelling the in-flight requests.
    """
    run = _LoadRun(base_url, model, workload, prompts, on_record, should_stop, on_progress,
                   on_measure_start, card)
    return await run.run()


def run_load_sync(
    base_url: str,
    model: str,
    workload: Mapping[str, Any],
    prompts: Sequence[Any],
    *,
    on_record: RecordCallback | None = None,
    should_stop: StopCallback | None = None,
    on_progress: ProgressCallback | None = None,
    on_measure_start: Callable[[], None] | None = None,
    card: CardGate | None = None,
) -> LoadResult:
    """``run_load`` in a fresh event loop (``asyncio.run``), for synchronous callers."""
    return asyncio.run(run_load(base_url, model, workload, prompts, on_record=on_record,
                                should_stop=should_stop, on_progress=on_progress,
                                on_measure_start=on_measure_start, card=card))
