"""``mopt rollback`` below the command line: restore a run's (or sweep's) recipe as a new
revision, and with ``reverify`` measure it again and judge it as ``mopt verify`` does.

    result = rollback("20261205T231122Z-tiny-cpu-38309e", reverify=True)
    result.restored.revision, result.exit_code
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model_optimizer.archive import runs_dir
from model_optimizer.events import EventCallback
from model_optimizer.history.rollback import RollbackResult
from model_optimizer.history.rollback import rollback as restore
from model_optimizer.recipe import load_recipe
from model_optimizer.signals import terminate_as_interrupt
from model_optimizer.usecase.notices import NoticeCallback, drift_of
from model_optimizer.verify import VerifyResult, verify


@dataclass(frozen=True)
class RollbackOutcome:
    """The restored revision and, with ``reverify``, its verification."""

    restored: RollbackResult
    verification: VerifyResult | None = None

    @property
    def exit_code(self) -> int:
        """0 once restored; with a verification, its exit code (`mopt verify`'s rule)."""
        return 0 if self.verification is None else self.verification.exit_code

    def to_dict(self) -> dict[str, Any]:
        """``mopt rollback --json``: the restored revision, or it and the verification."""
        if self.verification is None:
            return self.restored.to_dict()
        return {"rollback": self.restored.to_dict(),
                "verification": self.verification.to_dict()}


def rollback(ref: str | Path, *, recipe: Path | None = None, force: bool = False,
             reverify: bool = False, runs_base: Path | None = None,
             on_event: EventCallback | None = None,
             on_notice: NoticeCallback | None = None) -> RollbackOutcome:
    """Make run or sweep ``ref``'s recipe the current revision of ``recipe`` (default: the
    file it recorded) again; ``force`` replaces a target that is not a recipe of the same
    name. With ``reverify``: its drift told to ``on_notice``, then the restored revision
    measured again with the same workload and judged (SIGTERM, SIGHUP and SIGQUIT end it as
    Ctrl-C does)."""
    base = runs_dir(runs_base)
    restored = restore(ref, base, recipe, force=force)
    if not reverify:
        return RollbackOutcome(restored)
    terminate_as_interrupt()
    loaded = load_recipe(restored.recipe_file)
    drift_of(loaded, base, on_notice)
    check = verify(loaded, base, on_event=on_event,
                   archive_extra={"rollback_of": restored.source,
                                  "reverifies": restored.archive.name})
    return RollbackOutcome(restored, check)
