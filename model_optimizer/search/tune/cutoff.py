"""Could the range above a scanning tune's winner, cut off by a failure, hide the best?

A scanning tune measures few max_num_seqs levels of each combination of the other knobs (the
space's powers of two and the asked values). Its winner is the best of what it measured, so
when the level above the winner could not be measured or failed, the values in between were
never seen: under an OOM ceiling the scan server at the top did not start and the ceiling
was lowered (``search/tune/ceiling.py``), so 33..63 were not scanned; at an SLO edge the
next scanned level missed the SLO, and the edge lies anywhere in between. The tune then
wrote 32 (or 16) "resolved" where the truth was 0.86-0.89 of the best (the simulator's
``oom-ceiling`` and ``slo-edge`` surfaces at CV 5%: 8.2% and 9.9% of the resolved tunes
below 0.90 of the true best, 2026-12-07).

The question is the sweep's cut-range check (``search/sweep/fitscan.py``,
:func:`~model_optimizer.search.sweep.fitscan.cut_hides`, the rule defined once): the
curve fitted to the winner's combination's feasible windows, judged over ``winner ..
boundary - 1`` in the point fit and at the 2.5th percentile of 400 bootstrap refits; the
winner stays resolved only if both put it within ``1 - 1.5 * plateau_threshold`` of the
fitted best there. The boundary is the lowest level above the winner that this combination
could not use: a launch failure the scan ceiling was lowered below (the known memory
ceiling's :attr:`~model_optimizer.search.tune.ceiling.KnownCeiling.cut_at`) or a measured level
that was infeasible (an SLO missed, a window that failed). A winner at the space's top,
or with every level above it measured feasible, has no cut range: nothing is judged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from optuna.trial import FrozenTrial, TrialState

from model_optimizer.search.core.cutrange import cut_hides
from model_optimizer.search.core.fit import RESOLVED, Window
from model_optimizer.search.tune.ceiling import known_ceiling
from model_optimizer.search.tune.trials import same_params


@dataclass(frozen=True)
class CutRange:
    """The winner's level, the boundary above it and why, and the windows judged."""

    value: int
    boundary: int
    why: str
    windows: tuple[Window, ...]


def cut_range(chosen: FrozenTrial, trials: Sequence[FrozenTrial],
              scanned: str) -> CutRange | None:
    """The range above ``chosen`` a failure cut off, with its combination's feasible windows
    (None: no boundary above it)."""
    value = int(chosen.params[scanned])
    others = {k: v for k, v in chosen.params.items() if k != scanned}
    mine = [t for t in trials if t.state == TrialState.COMPLETE and t.values
            and "duplicate_of" not in t.user_attrs and "status" in t.user_attrs
            and same_params({k: v for k, v in t.params.items() if k != scanned}, others)]
    bounds: list[tuple[int, str]] = []
    launch = known_ceiling(trials, others, scanned).cut_at
    if launch is not None and launch > value:
        bounds.append((launch, f"a scan server at {launch} did not start for memory"))
    for trial in mine:
        level = int(trial.params[scanned])
        if level > value and not trial.user_attrs.get("feasible"):
            bounds.append((level, f"{level} was infeasible (trial {trial.number}: "
                                  f"{_infeasible(trial)})"))
    if not bounds:
        return None
    boundary, why = min(bounds, key=lambda bound: bound[0])   # a tie: the launch's reason
    windows = tuple(Window(float(t.params[scanned]), float(t.values[0])) for t in mine
                    if t.user_attrs.get("feasible") and int(t.params[scanned]) < boundary)
    return CutRange(value, boundary, why, windows)


def cut_off(chosen: FrozenTrial, trials: Sequence[FrozenTrial], scanned: str,
            threshold: float, seed: int = 0) -> list[str]:
    """The warning when the range above ``chosen`` that a failure cut off may hide the best
    (:func:`~model_optimizer.search.sweep.fitscan.cut_hides`); empty otherwise."""
    cut = cut_range(chosen, trials, scanned)
    if cut is None or not cut_hides(cut.value, list(cut.windows), cut.boundary, threshold,
                                    seed=seed):
        return []
    return [f"{scanned} {cut.value} of trial {chosen.number} lies below {cut.boundary}, where "
            f"{cut.why}, and the curve fitted to these knobs' {len(cut.windows)} feasible "
            f"windows may put it below {1 - RESOLVED * threshold:.1%} of the best before "
            f"{cut.boundary} (the sweep's cut-range check): the best may lie in the range "
            f"{cut.value + 1}..{cut.boundary - 1} the failure cut off, which the tune did "
            f"not measure (sweep {scanned} with these knobs, or tune again with a space "
            "that scans that range)"]


def _infeasible(trial: FrozenTrial) -> str:
    """Why a measured level was infeasible, in a few words."""
    attrs = trial.user_attrs
    if attrs.get("status") != "ok":
        return f"{attrs.get('status')}: {attrs.get('failure_kind')}"
    return "an SLO missed"
