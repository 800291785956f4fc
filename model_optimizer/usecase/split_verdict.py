"""``mopt split``'s verdict: per class, the fleet against one server, paired by round (the
rule of each figure's change: ``usecase/split_paired.py``), and, when the replicas ran
(``--replicas``), the replicas against one server and the fleet against the replicas.

The verdict is the fleet's against one server: **do not split** when a class's SLO is met by
one server and missed by the fleet; else **split** when a class gained (a figure, or an SLO
one server missed and the fleet meets), the losses listed beside it; else **do not split**
when a loss was shown or every figure is the same (one server is simpler); else **not
resolved**. The replicas do not change it: their comparisons are said after it, each as its
gains, losses and SLOs won or lost (or "no class changed", or "not resolved"): the fleet
against the replicas says whether the class rule is worth more than plain replication.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from model_optimizer.fleet.split import FLEET_ARM, REPLICAS_ARM, SINGLE_ARM, SplitWindow
from model_optimizer.usecase.split_paired import (
    GAIN,
    LABELS,
    LOSS,
    MARGIN,
    OVERALL,
    SAME,
    UNRESOLVED,
    ClassVerdict,
    FigureChange,
    changes_markdown,
    judge_classes,
)

__all__ = ["GAIN", "LABELS", "LOSS", "MARGIN", "NO_SPLIT", "OVERALL", "SAME", "SPLIT",
           "UNRESOLVED", "ClassVerdict", "Comparison", "FigureChange", "SplitVerdict",
           "judge_split"]

SPLIT, NO_SPLIT = "split", "do not split"
#: the comparisons beside the headline when the replicas ran: (arm, base) and their title
REPLICA_PAIRS = (((REPLICAS_ARM, SINGLE_ARM), "the replicas against one server"),
                 ((FLEET_ARM, REPLICAS_ARM), "the fleet against the replicas (no class rule)"))
#: how an arm is named in words
ARM_WORDS = {SINGLE_ARM: "one server", FLEET_ARM: "the fleet", REPLICAS_ARM: "the replicas"}


@dataclass(frozen=True)
class Comparison:
    """One arm against another beyond the headline (the replicas'), per class."""

    arms: tuple[str, str]  # (arm, base)
    title: str
    classes: tuple[ClassVerdict, ...]
    overall: ClassVerdict | None = None

    @property
    def pairs(self) -> int:
        """The most pairs any figure had."""
        return max((c.pairs for item in self.classes for c in item.changes), default=0)

    def words(self) -> str:
        """``the fleet against the replicas (no class rule): short's TTFT p99 -20% [...]``."""
        arm, base = (ARM_WORDS[a] for a in self.arms)
        slos = [f"{c.request_class}'s SLO {'met' if c.arm_slo else 'missed'} by {arm}, "
                f"{'met' if c.base_slo else 'missed'} by {base}"
                for c in self.classes if c.slo_won or c.slo_lost]
        shown = [ch.words() for c in self.classes for ch in c.shown(GAIN) + c.shown(LOSS)]
        if slos or shown:
            body = ", ".join(slos + shown)
        elif all(ch.outcome == SAME for c in self.classes for ch in c.changes):
            body = f"no class changed beyond +-{MARGIN:.0%}"
        else:
            body = f"not resolved after {self.pairs} paired round{'s' * (self.pairs != 1)}"
            body += self._soonest()
        return f"{self.title}: {body}"

    def _soonest(self) -> str:
        """`` (the soonest: short's req/s +19% [-2%, +45%], ~1 more round)``, or nothing."""
        pending = [ch for c in self.classes for ch in c.shown(UNRESOLVED)
                   if ch.rounds_needed is not None and ch.change is not None]
        if not pending or self.pairs < 2:
            return ""
        first = min(pending, key=lambda ch: ch.rounds_needed or 0)
        more = max(1, (first.rounds_needed or 0) - self.pairs)
        return f" (the soonest: {first.words()}, ~{more} more round{'s' * (more != 1)})"

    def to_dict(self) -> dict[str, Any]:
        """JSON form (an item of verdict.json's ``comparisons``)."""
        return {"arm": self.arms[0], "base": self.arms[1], "title": self.title,
                "words": self.words(), "pairs": self.pairs,
                "classes": [c.to_dict() for c in self.classes],
                "overall": self.overall.to_dict() if self.overall else None}

    def markdown(self) -> list[str]:
        """The report's section for this comparison."""
        arm, base = self.arms
        return [f"## {self.title[0].upper()}{self.title[1:]}, paired by round "
                f"({arm} / {base} - 1)", "",
                *changes_markdown([*self.classes, *([self.overall] if self.overall else [])]),
                "", f"{self.words()}"]


@dataclass(frozen=True)
class SplitVerdict:
    """The verdict on the rounds measured, in a word and in words."""

    verdict: str  # split | do not split | not resolved
    words: str
    pairs: int
    classes: tuple[ClassVerdict, ...]
    overall: ClassVerdict | None = None
    more_rounds: int | None = None
    comparisons: tuple[Comparison, ...] = ()  # the replicas' (--replicas), else none

    def to_dict(self) -> dict[str, Any]:
        """JSON form (verdict.json)."""
        return {"verdict": self.verdict, "words": self.words, "pairs": self.pairs,
                "more_rounds": self.more_rounds, "margin": MARGIN,
                "classes": [c.to_dict() for c in self.classes],
                "overall": self.overall.to_dict() if self.overall else None,
                "comparisons": [c.to_dict() for c in self.comparisons]}

    def markdown(self) -> list[str]:
        """The report's verdict sections: the paired changes, then the verdict."""
        lines = ["## Fleet against one server, paired by round", "",
                 *changes_markdown([*self.classes, *([self.overall] if self.overall else [])])]
        for comparison in self.comparisons:
            lines += ["", *comparison.markdown()]
        return lines + ["", f"**Verdict: {self.words}**"]


def judge_split(windows: Sequence[SplitWindow]) -> SplitVerdict:
    """The verdict on ``windows`` (the rule in the module's docstring)."""
    classes, overall = judge_classes(windows)
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
    comparisons: tuple[Comparison, ...] = ()
    if any(w.arm == REPLICAS_ARM for w in windows):
        comparisons = tuple(_comparison(windows, arms, title) for arms, title in REPLICA_PAIRS)
    words = "; ".join([words, *(c.words() for c in comparisons)])
    return SplitVerdict(verdict, words, pairs, classes, overall, more, comparisons)


def _comparison(windows: Sequence[SplitWindow], arms: tuple[str, str],
                title: str) -> Comparison:
    classes, overall = judge_classes(windows, arms)
    return Comparison(arms, title, classes, overall)


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
