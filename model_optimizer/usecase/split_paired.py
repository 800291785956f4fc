"""``mopt split``'s paired rule: one arm against another, per class and figure, paired by round.

Each round gives one window of each arm; for every class and figure (req/s, TTFT p50 and
p99, E2E p99) the round's pair is (arm, base), and the search's paired rule
(``search.sequential.Paired``: the mean and spread of the pairs' log-ratios, Student's t)
gives the change ``arm / base - 1`` with an interval whose ends are each a one-sided 95%
bound (together a two-sided 90% interval: the same test the sweep's decisions make). A
figure is

- **same** when the whole interval lies within +-5% (:data:`MARGIN`);
- a **gain** when the interval lies wholly on the arm's better side (faster, more req/s),
  a **loss** when it lies wholly on its worse side;
- **not resolved** otherwise, with the rounds in all at which the spread measured so far
  would resolve it (``Paired.pairs_to_show``).

A class's SLO verdict per arm is "met" when every usable window of that arm met it. The
pairs compared: fleet against single (the headline), and with ``--replicas`` the replicas
against single and the fleet against the replicas (``usecase/split_verdict.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from model_optimizer.fleet.split import FIGURE_KEYS, FLEET_ARM, SINGLE_ARM, ArmFigures, SplitWindow
from model_optimizer.search.core.sequential import Paired

MARGIN = 0.05
#: +1: higher is better for the arm (throughput); -1: lower is (latency)
BETTER = {"qps": 1, "ttft_p50_ms": -1, "ttft_p99_ms": -1, "e2e_p99_ms": -1}
LABELS = {"qps": "req/s", "ttft_p50_ms": "TTFT p50", "ttft_p99_ms": "TTFT p99",
          "e2e_p99_ms": "E2E p99"}
GAIN, LOSS, SAME, UNRESOLVED = "gain", "loss", "same", "not resolved"
OVERALL = "overall"
HEADLINE = (FLEET_ARM, SINGLE_ARM)  # (arm, base): the fleet against one server


@dataclass(frozen=True)
class FigureChange:
    """One class's figure, an arm against its base over the paired rounds."""

    request_class: str
    figure: str
    pairs: int
    outcome: str
    change: float | None = None  # arm / base - 1, the pairs' geometric mean
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
    """One class: its SLO verdict on the arm and on its base, and its figures' changes."""

    request_class: str
    base_slo: bool | None
    arm_slo: bool | None
    changes: tuple[FigureChange, ...]
    arms: tuple[str, str] = HEADLINE  # (arm, base)

    @property
    def slo_won(self) -> bool:
        """The base missed the class's SLO and the arm met it."""
        return self.base_slo is False and self.arm_slo is True

    @property
    def slo_lost(self) -> bool:
        """The base met the class's SLO and the arm missed it."""
        return self.base_slo is True and self.arm_slo is False

    def shown(self, outcome: str) -> list[FigureChange]:
        """The changes that came out as ``outcome``."""
        return [c for c in self.changes if c.outcome == outcome]

    @property
    def gained(self) -> bool:
        """The arm did better for this class: its SLO, or a figure beyond the noise."""
        return self.slo_won or bool(self.shown(GAIN))

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``<base>_slo_met``, ``<arm>_slo_met`` (``single_slo_met``, ...)."""
        arm, base = self.arms
        return {"class": self.request_class, f"{base}_slo_met": self.base_slo,
                f"{arm}_slo_met": self.arm_slo, "changes": [asdict(c) for c in self.changes]}


def paired_values(windows: Sequence[SplitWindow], name: str | None, key: str,
                  arms: tuple[str, str] = HEADLINE) -> list[tuple[float, float]]:
    """(arm, base) per round where both arms' windows are usable and measured ``key``."""
    by_round: dict[int, dict[str, float | None]] = {}
    for window in windows:
        if window.usable:
            part = window.overall if name is None else window.classes.get(name, ArmFigures())
            by_round.setdefault(window.round, {})[window.arm] = part.value(key)
    pairs = []
    for _, values in sorted(by_round.items()):
        arm, base = values.get(arms[0]), values.get(arms[1])
        if arm and base:
            pairs.append((arm, base))
    return pairs


def judge_change(name: str, key: str, pairs: list[tuple[float, float]]) -> FigureChange:
    """One figure's change and outcome from its (arm, base) pairs."""
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


def judge_class(windows: Sequence[SplitWindow], name: str | None,
                arms: tuple[str, str] = HEADLINE) -> ClassVerdict:
    """One class (None: the whole run) judged over the windows, ``arms[0]`` against
    ``arms[1]``."""
    label = name or OVERALL
    changes = tuple(judge_change(label, key, paired_values(windows, name, key, arms))
                    for key in FIGURE_KEYS)
    return ClassVerdict(label, _slo(windows, arms[1], name), _slo(windows, arms[0], name),
                        changes, arms)


def judge_classes(windows: Sequence[SplitWindow], arms: tuple[str, str] = HEADLINE
                  ) -> tuple[tuple[ClassVerdict, ...], ClassVerdict | None]:
    """Every class (the whole run when there are none) and the whole run beside them."""
    names = sorted({name for w in windows for name in w.classes})
    overall = judge_class(windows, None, arms)
    classes = tuple(judge_class(windows, name, arms) for name in names) or (overall,)
    return classes, overall if names else None


def changes_markdown(items: Sequence[ClassVerdict]) -> list[str]:
    """A markdown table of the classes' paired changes."""
    lines = ["| class | figure | pairs | change | interval | outcome |",
             "|---|---|---:|---:|---|---|"]
    for item in items:
        for c in item.changes:
            change = "-" if c.change is None else f"{c.change:+.1%}"
            span = "-" if c.low is None else f"[{c.low:+.1%}, {c.high:+.1%}]"
            lines.append(f"| {c.request_class} | {LABELS[c.figure]} | {c.pairs} | "
                         f"{change} | {span} | {c.outcome} |")
    return lines
