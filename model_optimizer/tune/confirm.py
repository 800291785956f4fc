"""The chosen trial of a scanning tune confirmed by a launch of its own, throughput included.

The best feasible trial was measured on a server launched at another max_num_seqs, and its
figure is the highest of many single windows (a lucky one wins as easily as a good one), so
before the revision is written:

1. **Its own launch.** The first of the best feasible configurations whose own launch passes
   (``search.scan.confirmation_problems``: the run completes, no request fails, nothing is
   preempted, the SLOs hold); one rejected, the next is tried.
2. **The runner-up, side by side.** The next best configuration whose scan interval does not
   lie wholly below the interval the winner's own launch measured (so it may still be as
   good) gets a launch of its own too, and then the two are launched **alternately** (R W,
   then W R: the sequential rule of ``search/sequential.py``, a launch each since the knobs
   need a restart) until the paired interval of their difference shows the higher one at
   ``1 - 2 * plateau_threshold`` (0.90) or more of the other, or :data:`CONFIRM_ROUNDS`
   rounds are spent; the one with the higher paired mean is written. A runner-up the
   confirmed winner clearly leads (its scan interval wholly below the winner's confirmed one)
   is not launched, and that comparison is the one the verdict rests on.
3. **The throughput check.** When the written configuration's confirmed interval lies wholly
   below its scan interval (``search.scanrules.Reading.below``, the rule the scan stops at a
   regression with), the scan's figure did not hold up: the choice is **not resolved**, and
   the outcome, ``summary.json`` and ``report.md`` say so. A window without an interval
   (too few requests for one) is not evidence either way: no warning from it.

The verdict (``resolved``) rests on those intervals, never on a per-window CV; when the
rounds ran out first it says how many more pairs the measured variance projects.
At most :data:`CONFIRM_CANDIDATES` configurations are launched; a confirmation already in
the tune's state (a resumed tune) is not launched again.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from optuna.trial import FrozenTrial

from model_optimizer.archive import utc_now
from model_optimizer.events import TuneConfirm, TuneConfirmed
from model_optimizer.load.classes import figure
from model_optimizer.measure import objective_half_width, step_figures, variant
from model_optimizer.search.scan import confirmation_problems
from model_optimizer.search.scanrules import Reading, pooled_cv
from model_optimizer.search.sequential import MIN_PAIRS, Difference, wrong_below
from model_optimizer.tune.host import ScanHost
from model_optimizer.tune.space import overrides_for
from model_optimizer.tune.trials import same_params

CONFIRM_CANDIDATES = 3
#: rounds of the winner and the runner-up side by side at most (a launch each per round)
CONFIRM_ROUNDS = MIN_PAIRS + 1


@dataclass(frozen=True)
class ConfirmVerdict:
    """What the confirmation chose: the trial to write (None: every candidate rejected),
    the figures of its own launch, what happened on the way, and the warnings that make
    the choice not resolved."""

    trial: FrozenTrial | None
    figures: dict = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    runner_up: int | None = None       # the trial confirmed side by side with the chosen
    decision: dict | None = None       # what the verdict rests on (the revision records it)

    @property
    def resolved(self) -> bool:
        """False when a warning says the confirmed figure does not back the scan's."""
        return not self.warnings

    def note(self) -> str:
        """One line for the outcome's reason."""
        return "; ".join([*self.notes, *(f"NOT RESOLVED: {w}" for w in self.warnings)])

    def to_dict(self) -> dict:
        """The form kept in the tune's state and summary.json."""
        return {"chosen": self.trial.number if self.trial is not None else None,
                "runner_up": self.runner_up, "resolved": self.resolved,
                "notes": list(self.notes), "warnings": list(self.warnings),
                "decision": self.decision}


def scan_reading(trial: FrozenTrial, metric: str) -> Reading:
    """The objective a trial was told (its scan window) with its interval."""
    attrs = trial.user_attrs
    half = attrs.get("half_width")
    if half is None:
        half = (attrs.get("figures") or {}).get(f"{metric}_half_width")
    return Reading(float(trial.values[0]), half)


def confirmed_reading(record: dict, metric: str) -> Reading | None:
    """The objective a confirming run measured with its interval (None: no figure)."""
    own = record.get("objective") or {}
    value = own.get("value", (record.get("figures") or {}).get(metric))
    if value is None:
        return None
    half = own.get("half_width", (record.get("figures") or {}).get(f"{metric}_half_width"))
    return Reading(float(value), half)


def confirm_best(host: ScanHost, ranked: list[FrozenTrial]) -> ConfirmVerdict:
    """Confirm the best of ``ranked`` (feasible trials, best first) and its runner-up."""
    metric, notes = host.config.metric, []
    passed: list[tuple[FrozenTrial, dict]] = []
    for trial in _distinct(ranked)[:CONFIRM_CANDIDATES]:
        if passed and not _contender(trial, passed[0][1], metric):
            continue
        record = _record(host, trial)
        if record["ok"]:
            passed.append((trial, record))
            if len(passed) == 2:
                break
        else:
            notes.append(f"trial {trial.number} {dict(trial.params)} rejected by its own "
                         f"launch ({'; '.join(record['problems'])})")
    if not passed:
        return ConfirmVerdict(None, {}, tuple(notes or ["no feasible trial to confirm"]))
    threshold = host.loaded.resolved["sweep"]["plateau_threshold"]
    rounds = _rounds(host, passed, metric) if len(passed) == 2 else []
    chosen, record = _higher(passed, rounds, metric)
    notes += _side_by_side(passed, chosen, metric)
    runner_up = next((t.number for t, _ in passed if t is not chosen), None)
    decision, unshown = _decision(passed, chosen, ranked, rounds, metric, threshold)
    warnings = [*_shortfall(chosen, record, metric), *unshown]
    return ConfirmVerdict(chosen, record["figures"], tuple(notes), tuple(warnings),
                          runner_up, decision)


def _rounds(host: ScanHost, passed: list[tuple[FrozenTrial, dict]],
            metric: str) -> list[tuple[float, float]]:
    """The winner and the runner-up launched alternately (their first launches are round
    one) until the paired interval answers, or :data:`CONFIRM_ROUNDS` rounds: (first's,
    second's) reading per round."""
    (first, _), (second, _) = passed
    bound = wrong_below(host.loaded.resolved["sweep"]["plateau_threshold"])
    while True:
        pairs = _pairs(host.confirmations, first.params, second.params, metric)
        difference = Difference.of(pairs)
        if len(pairs) >= CONFIRM_ROUNDS or (difference is not None and "open" not in (
                difference.answer(bound), _inverse(difference).answer(bound))):
            return pairs
        order = [second, first] if len(pairs) % 2 else [first, second]
        for trial in order:
            if not _confirm_one(host, trial)["ok"]:
                return _pairs(host.confirmations, first.params, second.params, metric)


def _pairs(confirmations: list[dict], first: dict, second: dict,
           metric: str) -> list[tuple[float, float]]:
    """(first, second) confirmed readings, matched in launch order."""
    def readings(params: dict) -> list[float]:
        return [reading.value for c in confirmations if c.get("ok")
                and same_params(c["params"], params)
                and (reading := confirmed_reading(c, metric)) is not None]
    return list(zip(readings(first), readings(second), strict=False))


def _inverse(difference: Difference) -> Difference:
    """The same interval seen from the other configuration (B/A)."""
    return Difference(1 / difference.ratio, 1 / difference.high, 1 / difference.low,
                      difference.pairs, difference.sd)


def _higher(passed: list[tuple[FrozenTrial, dict]], rounds: list[tuple[float, float]],
            metric: str) -> tuple[FrozenTrial, dict]:
    """The configuration to write: the higher paired mean over the rounds, else the higher
    single confirmed figure."""
    if len(rounds) >= 2:
        ratio = math.exp(statistics.fmean(math.log(a / b) for a, b in rounds if a > 0 < b))
        return passed[0] if ratio >= 1 else passed[1]
    return max(passed, key=lambda pair: _confirmed_value(pair[1], metric))


def _decision(passed: list[tuple[FrozenTrial, dict]], chosen: FrozenTrial,
              ranked: list[FrozenTrial], rounds: list[tuple[float, float]], metric: str,
              threshold: float) -> tuple[dict, list[str]]:
    """What the verdict rests on, and the warning when it does not show the choice at
    ``1 - 2 * threshold`` of the runner-up."""
    bound = wrong_below(threshold)
    if len(passed) == 2:
        difference = Difference.of(rounds)
        if difference is not None and chosen is not passed[0][0]:
            difference = _inverse(difference)
        other = next(t for t, _ in passed if t is not chosen)
        record = {"value": dict(chosen.params), "bound": bound, "kind": "paired",
                  "against": {"value": dict(other.params),
                              **(difference.to_dict() if difference else {})},
                  "rounds": len(rounds), "windows": 2 * len(rounds)}
        if difference is not None and difference.answer(bound) == "above":
            return record, []
        needed = difference.pairs_needed(bound) if difference is not None else None
        record["more"] = None if needed is None else {"windows": 2 * (needed - len(rounds))}
        shown = f"{difference}" if difference is not None else f"{len(rounds)} pair(s)"
        more = (f"; about {2 * (needed - len(rounds))} more launches side by side would "
                "resolve it" if needed else "")
        return record, [f"trial {chosen.number} {dict(chosen.params)} against trial "
                        f"{other.number} {dict(other.params)} side by side reads {shown}, "
                        f"not shown at {bound:.0%} or more{more}"]
    record = {"value": dict(chosen.params), "bound": bound, "kind": "unpaired",
              "against": None, "rounds": 0, "windows": 1}
    others = [t for t in ranked if not same_params(t.params, chosen.params)]
    if others:   # the runner-up was not launched: its scan interval lies below the winner's
        record["against"] = {"value": dict(others[0].params),
                             "ratio": round(_confirmed_value(passed[0][1], metric)
                                            / max(float(others[0].values[0]), 1e-9), 5)}
    return record, []


def tune_noise(trials: list[FrozenTrial], confirmations: list[dict],
               metric: str) -> dict | None:
    """The noise of the tune's readings (:func:`pooled_cv`): each configuration's figures,
    from the trials that measured it (a copied twin repeats its twin's figure: left out) and
    the launches that confirmed it; None when no configuration was read twice."""
    groups: list[tuple[dict, list[float]]] = []

    def add(params: dict, value: float | None) -> None:
        if value is None:
            return
        group = next((g for p, g in groups if same_params(p, params)), None)
        if group is None:
            groups.append((dict(params), group := []))
        group.append(float(value))

    for trial in trials:
        if trial.values and "duplicate_of" not in trial.user_attrs:
            add(trial.params, trial.values[0])
    for record in confirmations:
        if record.get("ok"):
            reading = confirmed_reading(record, metric)
            add(record["params"], reading.value if reading is not None else None)
    return pooled_cv(group for _, group in groups)


def _distinct(ranked: list[FrozenTrial]) -> list[FrozenTrial]:
    """The first trial of each configuration (a copied twin is the same configuration)."""
    first: list[FrozenTrial] = []
    for trial in ranked:
        if not any(same_params(trial.params, other.params) for other in first):
            first.append(trial)
    return first


def _contender(trial: FrozenTrial, winner: dict, metric: str) -> bool:
    """True unless ``trial``'s scan interval lies wholly below what the winner confirmed."""
    confirmed = confirmed_reading(winner, metric)
    return confirmed is None or not scan_reading(trial, metric).below(confirmed)


def _confirmed_value(record: dict, metric: str) -> float:
    reading = confirmed_reading(record, metric)
    return reading.value if reading is not None else float("-inf")


def _side_by_side(passed: list[tuple[FrozenTrial, dict]], chosen: FrozenTrial,
                  metric: str) -> list[str]:
    """The note comparing the two confirmed configurations (none with one)."""
    if len(passed) < 2:
        return []
    shown = ", ".join(f"trial {t.number} {dict(t.params)} {confirmed_reading(r, metric)}"
                      for t, r in passed)
    verdict = ("the runner-up confirmed higher and is written" if chosen is not passed[0][0]
               else "the best confirmed higher")
    return [f"confirmed side by side ({metric}): {shown}: {verdict}"]


def _shortfall(chosen: FrozenTrial, record: dict, metric: str) -> list[str]:
    """The warning when the chosen configuration's own launch reads below its scan (both
    with a measured interval: two bare figures prove nothing)."""
    confirmed, scanned = confirmed_reading(record, metric), scan_reading(chosen, metric)
    if confirmed is None or not (confirmed.known and scanned.known) \
            or not confirmed.below(scanned):
        return []
    return [f"trial {chosen.number}'s own launch measured {confirmed} {metric}, below its "
            f"scan window's {scanned}: the scan figure did not hold up, so this choice rests "
            "on a figure its own launch does not back (measure longer windows, or tune again "
            "on a quieter machine)"]


def _record(host: ScanHost, trial: FrozenTrial) -> dict:
    """The confirmation of ``trial``'s configuration: kept from before, else a launch."""
    done = [c for c in host.confirmations if same_params(c["params"], trial.params)]
    return done[-1] if done else _confirm_one(host, trial)


def _confirm_one(host: ScanHost, trial: FrozenTrial) -> dict:
    params, metric = dict(trial.params), host.config.metric
    host.emit(TuneConfirm(trial.number, params))
    host.session.sample_load()
    outcome = host.run_one(variant(host.loaded, overrides_for(params)),
                           host.session.steps_dir, on_event=host.emit,
                           archive_extra={"tune": host.tune_id, "confirm": True,
                                          "trial": trial.number, "params": params})
    problems = confirmation_problems(outcome, host.loaded.resolved)
    metrics = outcome.metrics or {}
    record = {"number": trial.number, "params": params, "ok": not problems,
              "problems": problems, "run_id": outcome.run_id,
              "figures": step_figures(outcome), "at": utc_now(),
              "objective": {"value": figure(metrics, metric),
                            "half_width": objective_half_width(metrics, metric)}}
    host.confirmations.append(record)
    host.session.save()
    host.emit(TuneConfirmed(**record))
    return record
