"""What a use case says as it goes, before or beside a launch that takes minutes: drift of
this machine from the recipe's validated block, a preflight warning, how a load will run, a
recipe written first (``mopt optimize MODEL_DIR``).

The command line prints each one as it comes (``cli/common.py`` ``print_notice``); a Python
caller may collect them, or pass nothing and read them from the result."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from model_optimizer.history.drift import check_drift
from model_optimizer.recipe import LoadedRecipe

DRIFT, PREFLIGHT, INFO, INIT = "drift", "preflight", "info", "init"


@dataclass(frozen=True)
class Notice:
    """One warning or remark: ``kind`` is ``drift``, ``preflight``, ``info`` or ``init`` (a
    file written before the work starts)."""

    kind: str
    text: str


NoticeCallback = Callable[[Notice], None]


def tell(on_notice: NoticeCallback | None, kind: str, lines: Iterable[str]) -> list[str]:
    """Pass each line to ``on_notice`` as a ``kind`` notice; the lines, as a list."""
    lines = list(lines)
    for line in lines:
        if on_notice is not None:
            on_notice(Notice(kind, line))
    return lines


def drift_of(loaded: LoadedRecipe, runs_base: Path, on_notice: NoticeCallback | None, *,
             strict: bool = False) -> list[str]:
    """This machine's drift from ``loaded``'s validated block, each message told; raises
    DriftError when ``strict`` (history.drift.check_drift)."""
    return tell(on_notice, DRIFT, check_drift(loaded.resolved, strict=strict,
                                              base_dir=loaded.base_dir, runs_base=runs_base))


def preflight_of(loaded: LoadedRecipe, runs_base: Path, on_notice: NoticeCallback | None, *,
                 force: bool = False) -> list[str]:
    """Preflight ``loaded``: PreflightError on a refusal (unless ``force``), else its
    warnings, each told."""
    from model_optimizer.preflight import enforce

    return tell(on_notice, PREFLIGHT, enforce(loaded, force=force, runs_base=runs_base))
