"""``mopt split``'s verdict: per class, the fleet against one server, paired by round.

Each round gives one window of each arm; for every class and figure (req/s, TTFT p50 and
p99, E2E p99) the round's pair is (fleet, single), and the search's paired rule
(``search.sequential.Paired``: the mean and spread of the pairs' log-ratios, Student's t)
gives the change ``fleet / single - 1`` with an interval whose ends are each a one-sided 95%
bound (together a two-sided 90% interval: the same test the sweep's decisions make). A
figure is

- **same** when the whole interval lies within +-5% (:data:`MARGIN`);
- a **gain** when the interval lies wholly on the fleet's better side (faster, more req/s),
  a **loss** when it lies wholly on its worse side;
- **not resolved** otherwise, with the rounds in all at which the spread measured so far
  would resolve it (``Paired.pairs_to_show``).

A class's SLO verdict per arm is "met" when every window of that arm met it. The verdict:
**do not split** when a class's SLO is met by one server and missed by the fleet; else
**split** when a class gained (a figure, or an SLO one server missed and the fleet meets),
the losses listed beside it; else **do not split** when a loss was shown or every figure is
the same (one server is simpler); else **not resolved**.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from model_optimizer.fleet.split import FIGURE_KEYS, FLEET_ARM, SINGLE_ARM, ArmFigures, SplitWindow
from model_optimizer.search.core.sequential import Paired

MARGIN = 0.05
#: +1: higher is better for the fleet (throughput); -1: lower is (latency)
BETTER = {"qps": 1, "ttft_p50_ms": -1, "ttft_p99_ms": -1, "e2e_p99_ms": -1}
LABELS = {"qps": "req/s", "ttft_p50_ms": "TTFT p50", "ttft_p99_ms": "TTFT p99",
          "e2e_p99_ms": "E2E p99"}
GAIN, LOSS, SAME, UNRESOLVED = "gain", "loss", "same", "not resolved"
SPLIT, NO_SPLIT = "split", "do not split"
OVERALL = "overall"


@dataclass(frozen=True)
class FigureChange:
    """One class's figure, fleet against single over the paired rounds."""

    request_class: str
    figure: str
    pairs: int
    outcome: str
    change: float | None = None  # fleet / single - 1, the pairs' geometric mean
    low: float | None = None
    high: float | None = None
    rounds_needed: int | None = None  # not resolved: rounds in all that would resolve it

    def words(self) -> str:
        """``short's TTFT p99 -38% [-52%, -21%]``."""
        if self.change is None:
            return f"{self.request_class}'s {LABELS[self.figure]}: fewer than 2 pairs"
        return (f"{self.request_class}'s {LABELS[self.figure]} {self.change:+.0%} "
                f"[{self.low:+.0%}, {self.high:+.0%}]")


@dataclass(frozen=True)
class ClassVerdict:
    """One class: its SLO verdict on each arm and its figures' changes."""

    request_class: str
    single_slo: bool | None
    fleet_slo: bool | None
    changes: tuple[FigureChange, ...]

    @property
    def slo_won(self) -> bool:
        """One server missed the class's SLO and the fleet met it."""
        return self.single_slo is False and self.fleet_slo is True

    @property
    def slo_lost(self) -> bool:
        """One server met the class's SLO and the fleet missed it."""
        return self.single_slo is True and self.fleet_slo is False

    def shown(self, outcome: str) -> list[FigureChange]:
        """The changes that came out as ``outcome``."""
        return [c for c in self.changes if c.outcome == outcome]

    @property
    def gained(self) -> bool:
        """The fleet did better for this class: its SLO, or a figure beyond the noise."""
        return self.slo_won or bool(self.shown(GAIN))

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"class": self.request_class, "single_slo_met": self.single_slo,
                "fleet_slo_met": self.fleet_slo, "changes": [asdict(c) for c in self.changes]}


@dataclass(frozen=True)
class SplitVerdict:
    """The verdict on the rounds measured, in a word and in words."""

    verdict: str  # split | do not split | not resolved
    words: str
    pairs: int
    classes: tuple[ClassVerdict, ...]
    overall: ClassVerdict | None = None
    more_rounds: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form (verdict.json)."""
        return {"verdict": self.verdict, "words": self.words, "pairs": self.pairs,
                "more_rounds": self.more_rounds, "margin": MARGIN,
                "classes": [c.to_dict() for c in self.classes],
                "overall": self.overall.to_dict() if self.overall else None}

    def markdown(self) -> list[str]:
        """The report's verdict section: the paired changes, then the verdict."""
        lines = ["## Fleet against one server, paired by round", "",
                 "| class | figure | pairs | change | interval | outcome |",
                 "|---|---|---:|---:|---|---|"]
        for item in [*self.classes, *([self.overall] if self.overall else [])]:
            for c in item.changes:
                change = "-" if c.change is None else f"{c.change:+.1%}"
                span = "-" if c.low is None else f"[{c.low:+.1%}, {c.high:+.1%}]"
                lines.append(f"| {c.request_class} | {LABELS[c.figure]} | {c.pairs} | "
                             f"{change} | {span} | {c.outcome} |")
        lines += ["", f"**Verdict: {self.words}**"]
        return lines


def paired_values(windows: Sequence[SplitWindow], name: str | None,
                  key: str) -> list[tuple[float, float]]:
    """(fleet, single) per round where both arms' windows are usable and measured ``key``."""
    by_round: dict[int, dict[str, float | None]] = {}
    for window in windows:
        if window.usable:
            part = window.overall if name is None else window.classes.get(name, ArmFigures())
            by_round.setdefault(window.round, {})[window.arm] = part.value(key)
    pairs = []
    for _, arms in sorted(by_round.items()):
        fleet, single = arms.get(FLEET_ARM), arms.get(SINGLE_ARM)
        if fleet and single:
            pairs.append((fleet, single))
    return pairs


def judge_change(name: str, key: str, pairs: list[tuple[float, float]]) -> FigureChange:
    """One figure's change and outcome from its (fleet, single) pairs."""
    paired = Paired.of(pairs)
    if paired is None:
        return FigureChange(name, key, len(pairs), UNRESOLVED)
    half = paired.half_width()
    low, high = math.exp(paired.mean - half) - 1, math.exp(paired.mean + half) - 1
    better = BETTER[key]
    if low >= -MARGIN and high <= MARGIN:
        outcome = SAME
    elif (low > 0 if better > 0 else high < 0):
        outcome = GAIN
    elif (high < 0 if better > 0 else low > 0):
        outcome = LOSS
    else:
        outcome = UNRESOLVED
    needed = _rounds_needed(paired) if outcome == UNRESOLVED else None
    return FigureChange(name, key, paired.n, outcome, math.exp(paired.mean) - 1, low, high,
                        needed)


def _rounds_needed(paired: Paired) -> int | None:
    """Pairs in all at which the spread so far would resolve the figure: show the difference
    its mean points to, or (a mean within the margin) show it within the margin. The
    projection is ``Paired.pairs_to_show`` on the room the interval has to shrink into."""
    shown = Paired(paired.n, abs(paired.mean), paired.sd).pairs_to_show(1.0)
    room = min(math.log1p(MARGIN) - paired.mean, paired.mean - math.log1p(-MARGIN))
    same = Paired(paired.n, room, paired.sd).pairs_to_show(1.0) if room > 0 else None
    return min((n for n in (shown, same) if n is not None), default=None)


def _slo(windows: Sequence[SplitWindow], arm: str, name: str | None) -> bool | None:
    """Met in every usable window of ``arm`` (None: no window, or no SLO judged)."""
    verdicts = [(w.overall if name is None else w.classes.get(name, ArmFigures())).slo_met
                for w in windows if w.usable and w.arm == arm]
    verdicts = [v for v in verdicts if v is not None]
    return all(verdicts) if verdicts else None


def judge_class(windows: Sequence[SplitWindow], name: str | None) -> ClassVerdict:
    """One class (None: the whole run) judged over the windows."""
    label = name or OVERALL
    changes = tuple(judge_change(label, key, paired_values(windows, name, key))
                    for key in FIGURE_KEYS)
    return ClassVerdict(label, _slo(windows, SINGLE_ARM, name), _slo(windows, FLEET_ARM, name),
                        changes)


def judge_split(windows: Sequence[SplitWindow]) -> SplitVerdict:
    """The verdict on ``windows`` (the rule in the module's docstring)."""
    names = sorted({name for w in windows for name in w.classes})
    overall = judge_class(windows, None)
    classes = tuple(judge_class(windows, name) for name in names) or (overall,)
    pairs = max((c.pairs for item in classes for c in item.changes), default=0)
    verdict, words = _verdict(classes)
    more = None
    if verdict == UNRESOLVED:
        needed = [c.rounds_needed for item in classes for c in item.shown(UNRESOLVED)]
        known = [n for n in needed if n is not None]
        more = max(known) - pairs if known and len(known) == len(needed) else None
        words = f"not resolved after {pairs} paired round{'s' * (pairs != 1)}" + (
            " (at least 2 are needed)" if pairs < 2 else
            f" (would need ~{more} more)" if more is not None else
            " (the spread so far projects no end: more rounds may not resolve it)")
    return SplitVerdict(verdict, words, pairs, classes, overall if names else None, more)


def _verdict(classes: Sequence[ClassVerdict]) -> tuple[str, str]:
    """(verdict, words) from the classes' outcomes."""
    lost = [c for c in classes if c.slo_lost]
    gained = [c for c in classes if c.gained]
    gains = [ch.words() for c in classes for ch in c.shown(GAIN)]
    losses = [ch.words() for c in classes for ch in c.shown(LOSS)]
    won = [f"{c.request_class}'s SLO missed by one server, met by the fleet"
           for c in classes if c.slo_won]
    if lost:
        names = ", ".join(f"{c.request_class}'s" for c in lost)
        besides = [f"the fleet's gains do not make up for it: {', '.join(gains)}"] \
            if gains else []
        return NO_SPLIT, "; ".join([f"do not split: {names} SLO met by one server, missed "
                                    "by the fleet", *losses, *besides])
    if gained:
        worth = ", ".join(c.request_class for c in gained)
        return SPLIT, f"split: {', '.join(won + gains + losses)}; worth it for {worth}"
    if losses:
        return NO_SPLIT, f"do not split: {', '.join(losses)}; no class gained"
    if all(ch.outcome == SAME for c in classes for ch in c.changes):
        return NO_SPLIT, (f"do not split: no class changed beyond +-{MARGIN:.0%} (one server "
                          "is simpler)")
    return UNRESOLVED, ""
