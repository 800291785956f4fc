"""What a sweep keeps between steps (``state.json``) and how it ended (the outcome the CLI
prints), and a measured value as the strategy sees it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from model_optimizer.search.core.session import RevisionOutcome, SearchState
from model_optimizer.search.measure import Measurement
from model_optimizer.search.sweep.strategy import Point, SweepConfig


@dataclass(kw_only=True)
class SweepState(SearchState):
    """Everything needed to resume: the sweep's inputs and what was measured so far."""

    config: SweepConfig
    tie_concurrency: bool
    objective: str
    history: list[Point] = field(default_factory=list)
    decisions: list[dict] = field(default_factory=list)
    figures: dict[str, dict] = field(default_factory=dict)  # str(value) -> latest figures
    step_figures: list[dict] = field(default_factory=list)  # one per history entry, in order
    confirmations: list[dict] = field(default_factory=list)
    strategy: str = "relaunch"          # relaunch | probe-scan (as resolved at the start)
    strategy_reason: str = ""
    server_launches: int = 0            # probe-scan: launches of the scan server
    scan_finished: bool = False         # probe-scan: the levels and re-measurements are done
    ceiling_failed: int | None = None   # a scan server at this max_num_seqs failed for memory
    knee: dict | None = None            # probe-fit: the fitted knee (search/core/fit.py Knee)
    strict: bool = False                # refuse to write a choice that is not resolved
    budget: float | None = None         # minutes for the whole sweep (search/sweep/budget.py)
    step_seconds: list[float] = field(default_factory=list)  # one per history entry
    server_start_s: float | None = None  # probe: the scan server's measured start

    def to_dict(self) -> dict:
        """JSON form for state.json."""
        return {**super().to_dict(), "config": self.config.to_dict(),
                "history": [p.to_dict() for p in self.history]}

    @classmethod
    def from_dict(cls, data: dict) -> SweepState:
        """Inverse of :meth:`to_dict`."""
        return cls(**{**data, "config": SweepConfig.from_dict(data["config"]),
                      "history": [Point.from_dict(p) for p in data["history"]]})


@dataclass
class SweepOutcome(RevisionOutcome):
    """How a sweep ended (``exit_code``: 0 when a recipe revision was written, 4 when no
    value met the SLOs, 130 interrupted)."""

    status: str
    archive: Path
    sweep_id: str
    chosen: Point | None = None
    reason: str = ""
    written: Path | None = None
    figures: dict = field(default_factory=dict)
    resolved: bool | None = None  # the verdict on the written choice (None: nothing written)

    def to_dict(self) -> dict:
        """JSON-ready summary."""
        return {"status": self.status, "sweep_id": self.sweep_id, "archive": str(self.archive),
                "chosen": self.chosen.to_dict() if self.chosen else None, "reason": self.reason,
                "written": str(self.written) if self.written else None, "figures": self.figures,
                "resolved": self.resolved}


def point_of(value: object, phase: str, measured: Measurement) -> Point:
    """The strategy's record of one measured value."""
    return Point(value=value, phase=phase, status=measured.status,
                 metric_samples=measured.samples, slo_met=measured.slo_met,
                 preemptions=measured.preemptions, failure_kind=measured.failure_kind,
                 launches=len(measured.run_ids), run_ids=measured.run_ids,
                 half_width=measured.half_width)
