"""``mopt split FLEET --sweep-instances`` below the command line: each instance's
``max_num_seqs`` swept alone under its own classes' traffic, then one revision of the fleet.

    outcome = sweep_instances(Path("recipes/tiny-cpu-fleet.yaml"))
    outcome.written, outcome.revision, outcome.exit_code

Each instance is swept as the fleet serves it (``fleet.sweep_revision.sweepable``: its
cores, its share, the workload restricted to the classes routed to it) by the sweep
``mopt sweep`` runs (``usecase.sweep.sweep`` with ``param=max_num_seqs``), one after the
other, so each has the machine to itself. Its revision goes to the experiment's archive
(``instance.<name>.yaml``; no member file is rewritten), its sweep's archive under the
experiment's ``steps/``. Then one revision of the fleet file is written with every chosen
value and the evidence beside it (``fleet.sweep_revision.write_sweeps``), unless an
instance's sweep chose nothing, or ``strict`` and a choice is not resolved.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from model_optimizer.archive import (
    STATUS_INTERRUPTED,
    STATUS_OK,
    RunArchive,
    failed_status,
    runs_dir,
    utc_now,
)
from model_optimizer.archive.names import GIVEN_RECIPE, STEPS_DIR
from model_optimizer.archive.start import write_start
from model_optimizer.engine.classify import INTERNAL_ERROR
from model_optimizer.errors import EXIT_OK, EXIT_SLO_FAILED, RecipeError, UsageError
from model_optimizer.events import ArchiveOpened, EventCallback, quiet
from model_optimizer.fleet import LoadedFleet, load_fleet
from model_optimizer.fleet.sweep_revision import PARAM, InstanceSweep, sweepable, write_sweeps
from model_optimizer.search.sweep.flags import SweepFlags
from model_optimizer.usecase.notices import NoticeCallback
from model_optimizer.usecase.sweep import sweep

if TYPE_CHECKING:
    from model_optimizer.search.sweep.loop import SweepOutcome

KIND = "fleet-sweep"
SWEEPS_FILE = "sweeps.json"
NOT_WRITTEN = "not_written"  # the experiment's status when no fleet revision was written


@dataclass
class FleetSweepOutcome:
    """The experiment: its archive, each instance's sweep, the fleet revision written (or
    why none was)."""

    archive: Path
    run_id: str
    sweeps: list[InstanceSweep] = field(default_factory=list)
    status: str = STATUS_INTERRUPTED
    written: Path | None = None
    revision: int | None = None
    refused: str | None = None  # why no fleet revision was written

    @property
    def exit_code(self) -> int:
        """0 the fleet revision was written; 4 not (a sweep chose nothing, or --strict)."""
        return EXIT_OK if self.written is not None else EXIT_SLO_FAILED

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the archive, each sweep, the revision."""
        return {"run_id": self.run_id, "archive": str(self.archive), "status": self.status,
                "sweeps": [s.to_dict() for s in self.sweeps],
                "written": str(self.written) if self.written else None,
                "revision": self.revision, "refused": self.refused}


def sweep_instances(fleet: Path | LoadedFleet, *, flags: SweepFlags | None = None,
                    strict: bool = False, output: Path | None = None,
                    runs_base: Path | None = None, force: bool = False,
                    on_event: EventCallback | None = None,
                    on_notice: NoticeCallback | None = None) -> FleetSweepOutcome:
    """Sweep every instance of ``fleet`` and write the fleet's next revision (over its file,
    or to ``output``); ``flags``: the sweep's settings beyond each member's sweep section
    (its knob is max_num_seqs); ``strict``: no fleet revision when a choice is not
    resolved. Ctrl-C is re-raised after the experiment's archive is sealed."""
    fleet = fleet if isinstance(fleet, LoadedFleet) else load_fleet(fleet)
    flags = _flags(flags)
    if fleet.path is None and output is None:
        raise UsageError("a fleet read from text needs output= for its revision")
    emit = on_event or quiet
    archive = RunArchive.create(runs_dir(runs_base), f"{fleet.name}-sweep", kind=KIND,
                                start=lambda new: _start_files(new, fleet, strict))
    emit(ArchiveOpened(archive.id, str(archive.path)))
    outcome = FleetSweepOutcome(archive.path, archive.id)
    try:
        for name in fleet.instances:
            archive.set_status("running", phase=f"sweeping instance {name}")
            swept = sweep(sweepable(fleet, name), flags, runs_base=archive.path / STEPS_DIR,
                          output=archive.path / f"instance.{name}.yaml", force=force,
                          on_event=on_event, on_notice=on_notice)
            outcome.sweeps.append(instance_sweep(name, swept))
        _write_fleet(fleet, outcome, strict, output)
    except KeyboardInterrupt:
        outcome.status = STATUS_INTERRUPTED
        raise
    except Exception:
        outcome.status = failed_status(INTERNAL_ERROR)  # a bug: archived as failed, re-raised
        raise
    finally:
        _finish(archive, outcome)
    return outcome


def _flags(flags: SweepFlags | None) -> SweepFlags:
    """``flags`` sweeping max_num_seqs (UsageError for another knob)."""
    flags = flags or SweepFlags()
    if flags.param not in (None, PARAM):
        raise UsageError(f"--sweep-instances sweeps each instance's {PARAM}, not "
                         f"{flags.param}; sweep another knob of one member with `mopt sweep`")
    return dataclasses.replace(flags, param=PARAM, strict=False)  # --strict: the fleet's


def instance_sweep(name: str, swept: SweepOutcome) -> InstanceSweep:
    """One instance's record from its sweep's outcome and the revision it wrote (its
    ``validated`` block: the figures, the knee)."""
    validated: dict[str, Any] = {}
    if swept.written is not None:
        validated = (yaml.safe_load(Path(swept.written).read_text(encoding="utf-8"))
                     or {}).get("validated") or {}
    chosen = swept.chosen.value if swept.written is not None and swept.chosen else None
    return InstanceSweep(name, swept.sweep_id, None if chosen is None else int(chosen),
                         swept.resolved, swept.status, swept.reason,
                         dict(validated.get("metrics") or {}), validated.get("knee"),
                         swept.exit_code)


def _write_fleet(fleet: LoadedFleet, outcome: FleetSweepOutcome, strict: bool,
                 output: Path | None) -> None:
    """The fleet revision, unless a sweep chose nothing or --strict refuses a choice."""
    unchosen = [s.name for s in outcome.sweeps if s.value is None]
    unresolved = [s.name for s in outcome.sweeps if not s.resolved]
    if unchosen:
        outcome.refused = (f"no value chosen for {', '.join(unchosen)} (see each sweep's "
                           "report): the fleet file was not written")
    elif strict and unresolved:
        outcome.refused = (f"--strict: {', '.join(unresolved)} written, not resolved: the "
                           "fleet file was not written (the instances' revisions are in "
                           "the archive)")
    else:
        try:
            outcome.written, outcome.revision, _ = write_sweeps(fleet, outcome.sweeps,
                                                                outcome.run_id, output)
        except (RecipeError, UsageError) as exc:  # the file changed meanwhile: exit 2
            outcome.refused, outcome.status = str(exc), failed_status(NOT_WRITTEN)
            raise
    outcome.status = STATUS_OK if outcome.written is not None else failed_status(NOT_WRITTEN)


def _start_files(archive: RunArchive, fleet: LoadedFleet, strict: bool) -> None:
    extra = {"kind": KIND, "fleet": fleet.name, "strict": strict, "param": PARAM,
             "instances": {name: list(inst.classes) for name, inst in fleet.instances.items()}}
    write_start(archive, fleet.front, extra)
    archive.write_text(GIVEN_RECIPE, fleet.source_text)


def _finish(archive: RunArchive, outcome: FleetSweepOutcome) -> None:
    """sweeps.json and the status; sealed. Runs in ``finally``."""
    try:
        archive.write_json(SWEEPS_FILE, outcome.to_dict())
    finally:
        archive.set_status(outcome.status, phase="finished", finished_at=utc_now(),
                           written=str(outcome.written) if outcome.written else None,
                           refused=outcome.refused)
        archive.close()
