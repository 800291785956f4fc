"""One search run (a sweep or a tune) in its archive folder: the object both stand on.

A :class:`SearchSession` owns what every search needs and no strategy should write again:

- the archive: created as ``runs/<id>-<recipe>-<kind>/`` with the recipe as given and the
  first ``state.json``, or reopened for ``--resume`` (the recipe reloaded from the archive);
- the state: the strategy's own :class:`SearchState` subclass, rewritten atomically to
  ``state.json`` by :meth:`SearchSession.save` after every step;
- the clock: elapsed time carried across resumes, and the time budget it is checked against;
- the machine's load: its 1-minute load average sampled at every measurement
  (:meth:`SearchSession.sample_load`), summarised for the written revision
  (:func:`load_summary`: ``validated.load_average``);
- measuring: each configuration as archived runs nested under ``<search>/steps/``, behind
  the quality gate when the recipe has one (its baseline evaluated once per search);
- the end: outputs, final status and sealing (manifest + run index) with Ctrl-C and SIGTERM
  held off (:meth:`SearchSession.run`), whether the search finished or was interrupted, so
  a second Ctrl-C cannot leave an unsealed archive.

The strategy (``search/sweep/``, ``search/tune/``) decides what to measure next and what to write.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from model_optimizer.archive import STATUS_INTERRUPTED, STATUS_OK, RunArchive, utc_now
from model_optimizer.archive.entry import revision_fields
from model_optimizer.archive.names import (
    GIVEN_RECIPE,
    STATE_FILE,
    STATUS_FILE,
    STEPS_DIR,
    WRITTEN_RECIPE,
)
from model_optimizer.errors import EXIT_INTERRUPTED, EXIT_OK, EXIT_SLO_FAILED, UsageError
from model_optimizer.events import ArchiveOpened, EventCallback, quiet
from model_optimizer.plan import load_model_config
from model_optimizer.quality.search_gate import SearchGate
from model_optimizer.reaper import reap_abandoned
from model_optimizer.recipe import LoadedRecipe, archived_overrides, load_recipe_text
from model_optimizer.search.measure import Measurement, measure_configuration
from model_optimizer.signals import interrupts_deferred

T = TypeVar("T")
S = TypeVar("S", bound="SearchState")


@dataclass(kw_only=True)
class SearchState:
    """What every search keeps in ``state.json``; strategies subclass it with their own."""

    recipe_file: str               # the recipe searched (reloaded from the archive's copy)
    overrides: list[str]           # its --set overrides
    varied: list[dict] = field(default_factory=list)  # values mopt set on it (Variation)
    output: str                    # where the chosen revision is written
    model_config: str | None = None  # config.json the planner reads; None: no planner
    started_at: str = field(default_factory=utc_now)
    elapsed_s: float = 0.0         # time spent searching, over every resume
    quality_baseline: str | None = None  # the quality gate's baseline eval (steps/<id>)
    load_samples: list[float] = field(default_factory=list)  # 1-min load average, sampled

    def to_dict(self) -> dict[str, Any]:
        """JSON form for state.json."""
        return asdict(self)

    @classmethod
    def from_dict(cls: type[S], data: dict[str, Any]) -> S:
        """Inverse of :meth:`to_dict`."""
        return cls(**data)


def load_summary(samples: list[float]) -> dict | None:
    """The load average over a search's measurements: min, median, max and the number of
    samples (None without one)."""
    if not samples:
        return None
    return {"min": min(samples), "median": round(statistics.median(samples), 2),
            "max": max(samples), "samples": len(samples)}


def read_search_archive(kind: str, folder: Path, state_type: type[S]) -> tuple[S, bool]:
    """The state of the ``kind`` search archived in ``folder`` and whether it had finished.

    Anything missing or unreadable is a usage error naming the folder and the fix.
    """
    try:
        state = state_type.from_dict(json.loads((folder / STATE_FILE).read_text()))
        (folder / GIVEN_RECIPE).read_text()
        status = json.loads((folder / STATUS_FILE).read_text())
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UsageError(f"{folder}: not a resumable {kind} archive ({exc}); give the folder "
                         f"printed by the interrupted `mopt {kind}`") from None
    return state, status.get("status") == STATUS_OK


class RevisionOutcome:
    """What a search's outcome (a dataclass with ``status`` and ``written``) shares: its exit
    code."""

    status: str
    written: Path | None

    @property
    def exit_code(self) -> int:
        """0 a validated revision was written; 4 nothing ran well enough; 130 interrupted."""
        if self.status == STATUS_INTERRUPTED:
            return EXIT_INTERRUPTED
        return EXIT_OK if self.written else EXIT_SLO_FAILED


class SearchSession:
    """A search's archive, state, clock and sealing. Make one with :meth:`create` or
    :meth:`resume`; the strategy then calls :meth:`run` with its search."""

    def __init__(self, kind: str, archive: RunArchive, loaded: LoadedRecipe,
                 state: SearchState, on_event: EventCallback | None = None):
        self.kind = kind
        self.archive = archive
        self.loaded = loaded
        self.state = state
        self.emit: EventCallback = on_event or quiet
        self.model_config = (load_model_config(state.model_config)
                             if state.model_config else None)
        self.quality = SearchGate(loaded, self.steps_dir, baseline_run=state.quality_baseline,
                                  on_event=self.emit)
        self._clock = time.monotonic()

    # ----- making one -------------------------------------------------------------------------
    @classmethod
    def create(cls, kind: str, loaded: LoadedRecipe, runs_base: str | Path,
               state_for: Callable[[RunArchive], SearchState],
               on_event: EventCallback | None = None) -> SearchSession:
        """A new archive ``<runs_base>/<id>-<recipe>-<kind>`` holding the recipe as given and
        the state ``state_for(archive)`` (which may name things after the archive)."""
        states: list[SearchState] = []

        def start(archive: RunArchive) -> None:
            states.append(state := state_for(archive))
            state.varied = [item.to_dict() for item in loaded.varied_values]
            archive.write_text(GIVEN_RECIPE, loaded.source_text)
            archive.write_json(STATE_FILE, state.to_dict())
            archive.write_entry(created_at=state.started_at, recipe_name=loaded.name,
                                recipe_revision=loaded.resolved.get("revision", 1),
                                recipe_file=state.output or state.recipe_file)
        reap_abandoned(runs_base)  # its steps reap only inside the search's own folder
        archive = RunArchive.create(runs_base, f"{loaded.name}-{kind}", kind=kind, start=start)
        return cls(kind, archive, loaded, states[0], on_event)

    @classmethod
    def resume(cls, kind: str, folder: Path, state: SearchState,
               on_event: EventCallback | None = None) -> SearchSession:
        """Reopen the archive in ``folder`` (read by :func:`read_search_archive`) to go on."""
        loaded = load_recipe_text((folder / GIVEN_RECIPE).read_text(), state.recipe_file,
                                  archived_overrides(state.overrides, state.varied))
        loaded.path = Path(state.recipe_file)
        archive = RunArchive(folder, folder.name)
        archive.set_status("running", phase="resumed", resumed_at=utc_now())
        return cls(kind, archive, loaded, state, on_event)

    def announce(self, **details: Any) -> None:
        """Tell the listener where the archive is (the ``archive`` event)."""
        self.emit(ArchiveOpened(self.archive.id, str(self.archive.path), **details))

    # ----- state and clock --------------------------------------------------------------------
    def elapsed(self) -> float:
        """Seconds spent searching, earlier sessions of a resumed search included."""
        return self.state.elapsed_s + (time.monotonic() - self._clock)

    def out_of_time(self, max_minutes: float | None) -> bool:
        """True once a time budget of ``max_minutes`` (None or 0: none) is spent."""
        return bool(max_minutes) and self.elapsed() > max_minutes * 60

    def sample_load(self) -> None:
        """Record the machine's 1-minute load average now (at a measurement)."""
        with contextlib.suppress(OSError):  # not every platform has one
            self.state.load_samples.append(round(os.getloadavg()[0], 2))

    def save(self) -> None:
        """Rewrite ``state.json`` (atomically) with the elapsed time brought up to date."""
        self.state.elapsed_s = self.elapsed()
        self._clock = time.monotonic()
        self.archive.write_json(STATE_FILE, self.state.to_dict())

    # ----- measuring --------------------------------------------------------------------------
    @property
    def steps_dir(self) -> Path:
        """Where the runs this search launches are archived (the run index looks there)."""
        return self.archive.path / STEPS_DIR

    def measure(self, step: LoadedRecipe, *, repeats: int, objective: str,
                labels: dict[str, Any]) -> Measurement:
        """Measure one configuration (planner check, quality gate when the recipe has one,
        ``repeats`` runs) under ``steps/``; each run's ``run.json`` names this search and
        carries ``labels``."""
        return measure_configuration(
            step, self.steps_dir, repeats=repeats, objective=objective,
            model_config=self.model_config, on_event=self.emit,
            archive_extra={self.kind: self.archive.id, **labels},
            quality_gate=self._quality_gate if self.quality.enabled else None)

    def _quality_gate(self, step: LoadedRecipe):
        """The quality gate's verdict on ``step``; its baseline's eval id is kept in the
        state (once known) so a resumed search does not evaluate the baseline again."""
        verdict = self.quality.check(step)
        if self.quality.baseline_run != self.state.quality_baseline:
            self.state.quality_baseline = self.quality.baseline_run
            self.save()
        return verdict

    # ----- the end ----------------------------------------------------------------------------
    def run(self, search: Callable[[], T], finish: Callable[[T], tuple[str, dict]],
            interrupted: Callable[[], None], *, seal_on_error: bool = False) -> T:
        """``search()``, then ``finish(outcome)`` (outputs; returns the final status and its
        details) and sealing, with interrupts held off. On Ctrl-C: the state saved, the
        archive marked interrupted with the command that resumes it, ``interrupted()``
        (outputs so far) and sealing, all with interrupts held off; then re-raised.
        ``seal_on_error``: any other exception is handled the same way (a pipeline whose
        stages are archives of their own closes its record whatever stopped it)."""
        stops: tuple[type[BaseException], ...] = (
            (KeyboardInterrupt, Exception) if seal_on_error else (KeyboardInterrupt,))
        try:
            outcome = search()
        except stops:
            with interrupts_deferred():
                try:
                    self.save()
                    self.archive.set_status(
                        STATUS_INTERRUPTED, phase="interrupted",
                        resume=f"mopt {self.kind} --resume {self.archive.path}")
                    interrupted()
                finally:
                    self.seal()
            raise
        with interrupts_deferred():
            self.save()
            status, details = finish(outcome)
            self.archive.set_status(status, phase="finished", finished_at=utc_now(), **details)
            self.seal()
        return outcome

    def seal(self) -> None:
        """Close the archive: its index entry completed with the revision it wrote (if any),
        its manifest written and its row registered in the run index."""
        written = self.archive.file(WRITTEN_RECIPE)
        if written.is_file():
            self.archive.write_entry(**revision_fields(written.read_text(encoding="utf-8")))
        self.archive.close()
