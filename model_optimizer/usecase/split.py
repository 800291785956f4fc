"""``mopt split FLEET`` below the command line: the single server (derived or declared), the
rounds of both arms, or of three with the replicas (``fleet/split.py``,
``fleet/replicas.py``), the verdict (``usecase/split_verdict.py``).

    outcome = split(Path("recipes/tiny-cpu-fleet.yaml"), rounds=3)
    outcome.verdict.words, outcome.exit_code
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model_optimizer.archive import runs_dir
from model_optimizer.engine.factory import EngineFactory
from model_optimizer.errors import EXIT_FAILURE, EXIT_OK, UsageError
from model_optimizer.events import EventCallback
from model_optimizer.fleet import LoadedFleet, load_fleet
from model_optimizer.fleet.replicas import replicas_fleet
from model_optimizer.fleet.single import single_server
from model_optimizer.fleet.split import SplitRun, SplitWindow, run_split
from model_optimizer.signals import terminate_as_interrupt
from model_optimizer.usecase.split_verdict import UNRESOLVED, SplitVerdict, judge_split

DEFAULT_ROUNDS = 3
MIN_ROUNDS = 2  # one pair gives no spread, so no interval


@dataclass(frozen=True)
class SplitOutcome:
    """The experiment and its verdict."""

    run: SplitRun
    verdict: SplitVerdict

    @property
    def exit_code(self) -> int:
        """0 a verdict (split or not), 1 not resolved, else the failed window's (3 a server
        or the router did not start, 5 one died or served nothing)."""
        if self.run.failed is not None:
            return self.run.failed.exit_code
        return EXIT_FAILURE if self.verdict.verdict == UNRESOLVED else EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the archive, every window, the verdict."""
        failed = self.run.failed
        return {"run_id": self.run.run_id, "archive": str(self.run.archive),
                "status": self.run.status, "windows": [w.to_dict() for w in self.run.windows],
                "failed_window": failed.to_dict() if failed is not None else None,
                **self.verdict.to_dict()}


def split(fleet: Path | LoadedFleet, *, single: Path | None = None,
          rounds: int = DEFAULT_ROUNDS, runs_base: Path | None = None,
          on_event: EventCallback | None = None,
          on_window: Callable[[SplitWindow], None] | None = None,
          engine_factory: EngineFactory | None = None,
          replicas: bool = False) -> SplitOutcome:
    """Compare ``fleet`` (a fleet file or a loaded one) with one server (``single``, a recipe
    file; default: the fleet's first instance given the whole machine) over ``rounds``
    rounds, archived as one ``fleet-split``; with ``replicas``, a third arm: the single server
    cut into one replica per instance behind the router with no class rule. SIGTERM ends it
    as Ctrl-C does."""
    if rounds < MIN_ROUNDS:
        raise UsageError(f"--rounds {rounds}: at least {MIN_ROUNDS} rounds are needed (one "
                         "round's pair has no spread to judge by)")
    fleet = fleet if isinstance(fleet, LoadedFleet) else load_fleet(fleet)
    server = single_server(fleet, single)
    copies = replicas_fleet(fleet, server, single) if replicas else None
    terminate_as_interrupt()
    run = run_split(fleet, server, runs_dir(runs_base), rounds=rounds, judge=judge_split,
                    on_event=on_event, on_window=on_window, engine_factory=engine_factory,
                    replicas=copies)
    assert isinstance(run.judged, SplitVerdict)
    return SplitOutcome(run, run.judged)
