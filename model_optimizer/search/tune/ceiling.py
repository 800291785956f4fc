"""What a scanning tune knows of the memory ceiling: which scan servers started, which failed.

Every launch a scanning trial makes is recorded on it (user attribute ``server_launches``:
the max_num_seqs launched, whether the server started, the failure class when it did not),
so the study itself is the record: a resumed worker, or another worker of a shared study,
reads the same facts. For the combination of the other knobs a trial asks for:

- a launch of **the same combination** that failed to start for memory (``oom``,
  ``kv_cache_too_small``: ``engine.classify.MEMORY_CLASSES``) at ``F`` is a fact: a level at
  or above ``F`` is recorded as infeasible without a launch, and the scan ceiling is lowered
  by the shared bisection rule (``search/core/scanrules.py``: halfway from the highest level that
  started to ``F``);
- a failure of **another combination** is a hint only: it lowers the scan ceiling (the
  extra levels a launch measures), never marks a level infeasible; the asked level is still
  launched. Why not a fact: what fits depends on knobs the tune cannot read the effect of.
  block_size or prefix caching change little of the memory a launch needs for max_num_seqs
  sequences (the KV pool is set by the memory settings, not the block size), but
  kv_cache_dtype, max_model_len, gpu_memory_utilization or a quantization change it a lot;
- a start failure of another class (a bad flag, a missing model, a time-out) says nothing of
  memory: the trial launches its asked configuration alone, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from optuna.trial import FrozenTrial

from model_optimizer.engine.classify import MEMORY_CLASSES
from model_optimizer.search.core.scanrules import lower_ceiling
from model_optimizer.search.tune.trials import same_params

#: the knob a scanning tune scans on one server (``search/tune/scan.py``)
SCANNED = "max_num_seqs"
LAUNCHES_ATTR = "server_launches"
#: scan servers one trial may launch (the ceiling, one lowered, the asked level alone)
MAX_SCAN_LAUNCHES = 3


@dataclass(frozen=True)
class Launch:
    """One server launch of a trial at ``level`` (max_num_seqs)."""

    level: int
    started: bool
    failure: str | None = None

    @property
    def memory(self) -> bool:
        """True when it failed to start because the configuration does not fit."""
        return not self.started and self.failure in MEMORY_CLASSES

    def to_dict(self) -> dict:
        """The form kept in the trial's user attributes."""
        return {"max_num_seqs": self.level, "started": self.started, "failure": self.failure}

    @classmethod
    def from_dict(cls, data: dict) -> Launch:
        """Read one recorded launch."""
        return cls(int(data["max_num_seqs"]), bool(data["started"]), data.get("failure"))


@dataclass(frozen=True)
class KnownCeiling:
    """The memory ceiling as known for one combination of the other knobs."""

    failed: int | None = None        # the lowest level of this combination that did not fit
    failure: str | None = None       # its failure class
    failed_in: int | None = None     # the trial that launched it
    started: int | None = None       # the highest level of this combination that started
    hint: int | None = None          # the lowest level another combination did not fit

    def infeasible(self, level: int) -> bool:
        """True when ``level`` is at or above a launch of this combination that did not fit."""
        return self.failed is not None and level >= self.failed

    def bound(self, top: int, low: int) -> int:
        """The scan ceiling for the levels a launch measures beside the asked one: ``top``
        lowered by bisection below a failure of this combination, else below another's."""
        failed = self.cut_at
        if failed is None:
            return top
        return min(top, lower_ceiling(failed, self.started, low))

    @property
    def cut_at(self) -> int | None:
        """The launch failure the scan ceiling is lowered below: this combination's, else
        another's above every level this combination started (None: not lowered)."""
        if self.failed is None and self.hint is not None and (self.started or 0) < self.hint:
            return self.hint
        return self.failed

    def why_infeasible(self, level: int) -> str:
        """The reason recorded for a level at or above the failed launch."""
        where = f" in trial {self.failed_in}" if self.failed_in is not None else ""
        return (f"max_num_seqs {level} is at or above {self.failed}, which did not start "
                f"with these knobs ({self.failure}{where}): infeasible, not launched")

    def with_launch(self, launch: Launch, trial: int) -> KnownCeiling:
        """This knowledge after ``launch`` of this combination (by ``trial``)."""
        if launch.started and (self.failed is None or launch.level < self.failed):
            return replace(self, started=max(self.started or 0, launch.level))
        if launch.memory and (self.failed is None or launch.level < self.failed):
            started = self.started if (self.started or 0) < launch.level else None
            return replace(self, failed=launch.level, failure=launch.failure,
                           failed_in=trial, started=started)
        return self


def launches_of(trial: FrozenTrial) -> list[Launch]:
    """The server launches recorded on ``trial``."""
    return [Launch.from_dict(d) for d in trial.user_attrs.get(LAUNCHES_ATTR) or []]


def known_ceiling(trials: Sequence[FrozenTrial], others: dict, scanned: str) -> KnownCeiling:
    """What the study's recorded launches say of the ceiling for ``others`` (the values of
    every knob but ``scanned``)."""
    known, hints = KnownCeiling(), []
    for trial in sorted(trials, key=lambda t: t.number):
        own = {k: v for k, v in trial.params.items() if k != scanned}
        for launch in launches_of(trial):
            if same_params(own, others):
                known = known.with_launch(launch, trial.number)
            elif launch.memory:
                hints.append(launch.level)
    return replace(known, hint=min(hints)) if hints else known
