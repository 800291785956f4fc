"""Did a validated revision's figures hold? The one verification rule, defined once.

``mopt verify`` and ``mopt rollback --apply`` both re-measure a revision and compare the new
figures with the ones that validated it; both judge with :func:`judge`.

A figure **regressed** when the new measurement is worse than the validated one (lower
throughput, higher latency) by more than the **noise**, the largest of:

- the **intervals of both runs**: the 95% half-widths ``metrics.json`` holds for the
  figure (batch means for rates, a bootstrap for latency percentiles; ``load/steady.py``)
  combined as for a difference, ``sqrt(h_old^2 + h_new^2)``, relative to the validated
  value (one side without an interval counts as noisy as the other);
- for a latency, the same for the runs' **throughput** (QPS): its batch means see how the
  machine's speed moved during each run, which a bootstrap over requests cannot; what
  slows a run moves its latencies as much as its throughput;
- the **archived noise** of the search that validated the revision: the pooled coefficient
  of variation of the windows it read more than once (``summary.json`` ``noise.cv``), as the
  band of a difference of two such readings, ``1.96 * sqrt(2) * cv``. It is measured on
  the search's objective and applied to every figure: what slows a whole run (another
  program on the machine, a cold cache) moves its latencies as much as its throughput;
- ``mopt diff``'s floors (:mod:`.stats`): the **minimum effect** (10%), and how far either
  run **drifted** between its own halves (the machine changed during the run).

A figure better by more than the noise is **improved**; within it, it **holds**. A figure
that either side lacks, or a TPOT a side cannot show (its outputs arrived in one chunk:
:func:`.stats.coalesced_fraction`), is **not judged**. The revision holds when no judged
figure regressed and at least one was judged.

A measured window the cross-check flags **client-bound** (:mod:`..crosscheck`: the engine
did not hold the requests for more than :data:`..crosscheck.STARVED_LIMIT` of the client's
in-flight time) is **not judged** at all: its pace was the load client's and the API
server's, not the engine's, so neither a regression nor a hold read from it is evidence
about the engine. Its figures are still compared and shown, each marked not judged, and the
verdict names the figures of the check (:func:`client_bound`).

**Clocks.** On a GPU each window records its cards' temperature and SM clock
(``metrics.json`` ``thermals``); the verdict compares the SM clocks of both windows
(:func:`..telemetry.thermal.compare_clocks`: the same clock within 2%) and says so when they
differ or one side recorded none (``clocks``), e.g. "taken at different clocks: SM 1980 vs
1755 MHz". It does not change the verdict: a card that runs slower in production serves
slower, which is what a verification is for, and the note tells the reader to look at the
card before the recipe. Without a GPU on either side there is nothing to say (None).

The runs of one machine swing by 20-60% between runs minutes apart (docs/design.md
section 4); a fixed tolerance under that noise calls noise a regression, which is why there
is none here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from model_optimizer.crosscheck import STARVED_LIMIT
from model_optimizer.history import stats
from model_optimizer.history.diff import latency_samples_ms
from model_optimizer.telemetry.thermal import ClockComparison, compare_clocks

#: the figures judged: (metrics.json key, +1 when higher is better, -1 when lower is)
CHECKED = (("qps", 1), ("output_tok_s", 1), ("ttft_p50_ms", -1), ("tpot_p50_ms", -1),
           ("e2e_p50_ms", -1))
RATE_WEIGHTS = {"qps": None, "output_tok_s": "output_tokens"}
Z95 = 1.96
HOLDS, REGRESSED, IMPROVED, NOT_JUDGED = "holds", "regressed", "improved", "not judged"
CLIENT_BOUND_NOTE = "client-bound window"


@dataclass(frozen=True)
class Evidence:
    """One side of a verification: its figures (``metrics.json``, or a validated block's
    metrics) and, where known, its measured requests (for the drift floor)."""

    metrics: dict
    requests: list[dict] | None = None
    label: str = ""

    def value(self, key: str) -> float | None:
        """A numeric figure, None when absent or not a number."""
        found = self.metrics.get(key)
        if isinstance(found, bool) or not isinstance(found, int | float):
            return None
        return float(found) if math.isfinite(found) else None

    def half_width(self, key: str) -> float | None:
        """The figure's 95% half-width, None without one."""
        found = ((self.metrics.get("intervals") or {}).get(key) or {}).get("half_width")
        if isinstance(found, bool) or not isinstance(found, int | float):
            return None
        return float(found) if math.isfinite(found) and found >= 0 else None


@dataclass(frozen=True)
class FigureCheck:
    """One figure, validated and measured, with the noise it was judged against."""

    metric: str
    validated: float | None
    measured: float | None
    validated_half_width: float | None
    measured_half_width: float | None
    change: float | None      # (measured - validated) / validated
    worse_by: float | None    # the change in the bad direction (negative: better)
    noise: float | None       # relative band the change must leave to count
    noise_from: str
    verdict: str
    note: str = ""

    def to_dict(self) -> dict:
        """JSON form."""
        return {"metric": self.metric, "validated": self.validated, "measured": self.measured,
                "validated_half_width": self.validated_half_width,
                "measured_half_width": self.measured_half_width,
                "relative_change": self.change, "worse_by": self.worse_by,
                "noise": self.noise, "noise_from": self.noise_from, "verdict": self.verdict,
                "note": self.note}

    def describe(self) -> str:
        """``qps: 14.2 ± 1.1 -> 3.1 ± 0.4 (-78%; noise 23%, the intervals of both runs)``."""
        def side(value: float | None, half_width: float | None) -> str:
            if value is None:
                return "-"
            return f"{value:.4g}" + (f" ± {half_width:.2g}" if half_width is not None else "")

        text = (f"{self.metric}: {side(self.validated, self.validated_half_width)} -> "
                f"{side(self.measured, self.measured_half_width)}")
        if self.change is not None and self.noise is not None:
            text += f" ({self.change:+.0%}; noise {self.noise:.0%}, {self.noise_from})"
        return text + (f" ({self.note})" if self.note else "")


@dataclass
class Verdict:
    """Every checked figure's judgement; ``holds`` is the revision's."""

    checks: list[FigureCheck] = field(default_factory=list)
    archived_cv: float | None = None
    client_bound: dict | None = None  # the measured window's feed check, when client-bound
    clocks: ClockComparison | None = None  # the SM clocks of both windows (GPU runs)

    @property
    def clock_note(self) -> str | None:
        """``taken at different clocks: SM 1980 vs 1755 MHz`` when the clocks differ or one
        side has none; None when they are the same or neither side ran on a GPU."""
        return self.clocks.text if self.clocks is not None and not self.clocks.same else None

    @property
    def regressed(self) -> list[FigureCheck]:
        """The figures that regressed beyond the noise."""
        return [c for c in self.checks if c.verdict == REGRESSED]

    @property
    def judged(self) -> list[FigureCheck]:
        """The figures that could be judged."""
        return [c for c in self.checks if c.verdict != NOT_JUDGED]

    @property
    def holds(self) -> bool:
        """At least one figure judged and none regressed."""
        return bool(self.judged) and not self.regressed

    @property
    def word(self) -> str:
        """``holds``, ``regressed`` or ``not judged``."""
        return REGRESSED if self.regressed else HOLDS if self.judged else NOT_JUDGED

    @property
    def reason(self) -> str | None:
        """Why nothing was judged: ``client-bound (...)``, ``no figure could be compared``;
        None when something was."""
        if self.client_bound is not None:
            return f"client-bound ({describe_feed(self.client_bound)})"
        return None if self.judged else "no figure could be compared with the validated one"

    def to_dict(self) -> dict:
        """JSON form."""
        return {"verdict": self.word, "holds": self.holds, "reason": self.reason,
                "client_bound": self.client_bound,
                "clocks": self.clocks.to_dict() if self.clocks else None,
                "regressed": [c.metric for c in self.regressed],
                "archived_cv": self.archived_cv, "checks": [c.to_dict() for c in self.checks],
                "rule": "regressed when worse than validated by more than the noise: the "
                        "largest of the 95% intervals of both runs combined (for a latency "
                        "also their throughput's), the validating search's run-to-run noise "
                        "(1.96 x sqrt(2) x CV), the 10% minimum effect and either run's "
                        "drift between its halves"}


# ----- the noise ---------------------------------------------------------------------------
def _interval_band(key: str, old: Evidence, new: Evidence, base: float) -> float | None:
    widths = [w for w in (old.half_width(key), new.half_width(key)) if w is not None]
    if not widths:
        return None
    if len(widths) == 1:
        widths *= 2  # the side without an interval counts as noisy as the other
    return math.hypot(*widths) / abs(base)


def _drift(key: str, side: Evidence) -> float:
    requests = side.requests or []
    if key in RATE_WEIGHTS:
        return stats.rate_drift(stats.completion_gaps(requests, RATE_WEIGHTS[key]))
    return stats.half_drift(latency_samples_ms(requests, key.split("_")[0]))


def noise_band(key: str, old: Evidence, new: Evidence, base: float,
               archived_cv: float | None) -> tuple[float, str]:
    """The relative band a change of figure ``key`` must leave, and what set it."""
    parts = {f"the {stats.MIN_EFFECT:.0%} minimum effect": stats.MIN_EFFECT}
    band = _interval_band(key, old, new, base)
    if band is not None:
        parts["the 95% intervals of both runs"] = band
    rate = old.value("qps")
    speed = _interval_band("qps", old, new, rate) if key not in RATE_WEIGHTS and rate else None
    if speed is not None:
        parts["the throughput intervals of both runs"] = speed
    if archived_cv is not None and archived_cv >= 0:
        parts[f"the validating search's run-to-run noise (CV {archived_cv:.0%})"] = (
            Z95 * math.sqrt(2) * archived_cv)
    drift = max(_drift(key, old), _drift(key, new))
    if drift > 0:
        parts["the runs' drift between their halves"] = drift
    source, value = max(parts.items(), key=lambda item: item[1])
    return value, source


# ----- the rule ------------------------------------------------------------------------------
def _coalesced(side: Evidence) -> bool:
    return stats.coalesced_fraction(side.requests or []) > stats.COALESCED_LIMIT


def judge_figure(key: str, sign: int, old: Evidence, new: Evidence,
                 archived_cv: float | None) -> FigureCheck:
    """One figure's verdict (see the module docstring)."""
    before, after = old.value(key), new.value(key)
    widths = (old.half_width(key), new.half_width(key))
    if before is None or after is None or before == 0:
        return FigureCheck(key, before, after, *widths, None, None, None, "", NOT_JUDGED,
                           "measured on one side only" if before != 0 else
                           "the validated figure is 0")
    if key.startswith("tpot_") and (_coalesced(old) or _coalesced(new)):
        return FigureCheck(key, before, after, *widths, None, None, None, "", NOT_JUDGED,
                           "outputs arrived in one chunk: decode not observed")
    change = (after - before) / abs(before)
    worse_by = -sign * change
    noise, source = noise_band(key, old, new, before, archived_cv)
    verdict = REGRESSED if worse_by > noise else IMPROVED if -worse_by > noise else HOLDS
    return FigureCheck(key, before, after, *widths, change, worse_by, noise, source, verdict)


def client_bound(side: Evidence) -> dict | None:
    """The window's ``feed`` check (``metrics.json``) when the cross-check flagged it
    client-bound; None when it was engine-paced or not checked (no server histograms)."""
    found = side.metrics.get("feed")
    return dict(found) if isinstance(found, dict) and found.get("client_bound") is True \
        else None


def describe_feed(found: dict) -> str:
    """``the engine held the requests for 87% of the client's in-flight time, starved 13%,
    over the 10% limit; 8 in flight``."""
    held, starved = found.get("held_share"), found.get("starved_share")
    if held is None or starved is None:
        return "the cross-check flagged it"
    in_flight = f"; {found['intended']} in flight" if found.get("intended") else ""
    return (f"the engine held the requests for {held:.0%} of the client's in-flight time, "
            f"starved {starved:.0%}, over the {STARVED_LIMIT:.0%} limit{in_flight}")


def _not_judged(check: FigureCheck) -> FigureCheck:
    """``check`` from a client-bound window: not judged, its reading kept in the note."""
    note = CLIENT_BOUND_NOTE if check.verdict == NOT_JUDGED else \
        f"{CLIENT_BOUND_NOTE}: would read {check.verdict}"
    return replace(check, verdict=NOT_JUDGED,
                   note=f"{check.note}; {note}" if check.note else note)


def judge(validated: Evidence, measured: Evidence,
          archived_cv: float | None = None) -> Verdict:
    """Every figure of :data:`CHECKED`, the measured side against the validated one; every
    one not judged when the measured window was client-bound; the SM clocks of both sides
    compared (module docstring)."""
    checks = [judge_figure(key, sign, validated, measured, archived_cv)
              for key, sign in CHECKED]
    bound = client_bound(measured)
    if bound is not None:
        checks = [_not_judged(check) for check in checks]
    clocks = compare_clocks(validated.metrics.get("thermals"), measured.metrics.get("thermals"))
    return Verdict(checks, archived_cv, bound, clocks)
