"""The chosen trial of a scanning tune confirmed by a launch of its own, throughput included.

The best feasible trial was measured on a server launched at another max_num_seqs, and its
figure is the highest of many single windows (a lucky one wins as easily as a good one), so
before the revision is written:

1. **Its own launch.** The first of the best feasible configurations whose own launch passes
   (``search.scan.confirmation_problems``: the run completes, no request fails, nothing is
   preempted, the SLOs hold); one rejected, the next is tried.
2. **The runner-up, side by side.** The next best configuration whose scan interval does not
   lie wholly below the interval the winner's own launch measured (so it may still be as
   good) gets a launch of its own too; of the two, the higher confirmed figure is written.
   A runner-up the confirmed winner clearly leads is not launched.
3. **The throughput check.** When the written configuration's confirmed interval lies wholly
   below its scan interval (``search.scanrules.Reading.below``, the rule the scan stops at a
   regression with), the scan's figure did not hold up: the choice is **not resolved**, and
   the outcome, ``summary.json`` and ``report.md`` say so. A window without an interval
   (too few requests for one) is not evidence either way: no warning from it.
4. **The range a failure cut off.** When a level above the written max_num_seqs of the same
   other knobs failed to launch for memory or was infeasible, the sweep's cut-range check
   judges whether the curve fitted to those knobs' windows may rise above it by more than
   the margin before that level (``search/tune/cutoff.py``): then it is **not resolved**
   either.
5. **The margin over the other combinations.** The written configuration must be shown to
   be at least ``1 - 2t`` of each feasible configuration of every other combination of the
   knobs but max_num_seqs (each other block_size, say) at one-sided 95%, by the sweep's
   margin rule (``search/core/margin.py``; which windows count: ``search/tune/margin.py``);
   a combination it is not shown ahead of makes it **not resolved**, named with its bound.

At most :data:`CONFIRM_CANDIDATES` configurations are launched; a confirmation already in
the tune's state (a resumed tune) is not launched again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from optuna.trial import FrozenTrial

from model_optimizer.archive import utc_now
from model_optimizer.events import TuneConfirm, TuneConfirmed
from model_optimizer.load.classes import figure
from model_optimizer.search.core.scan import confirmation_problems
from model_optimizer.search.core.scanrules import Reading, fell_short, noise_above, pooled_cv
from model_optimizer.search.measure import objective_half_width, step_figures
from model_optimizer.search.tune.ceiling import SCANNED
from model_optimizer.search.tune.cutoff import cut_off
from model_optimizer.search.tune.host import ScanHost
from model_optimizer.search.tune.margin import margin_warnings
from model_optimizer.search.tune.space import trial_recipe
from model_optimizer.search.tune.trials import same_params

CONFIRM_CANDIDATES = 3


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
                "notes": list(self.notes), "warnings": list(self.warnings)}


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
    chosen, record = max(passed, key=lambda pair: _confirmed_value(pair[1], metric))
    notes += _side_by_side(passed, chosen, metric)
    runner_up = next((t.number for t, _ in passed if t is not chosen), None)
    threshold = host.loaded.resolved["sweep"]["plateau_threshold"]
    noise, trials = tune_noise(ranked, host.confirmations, metric), \
        host.study.get_trials(deepcopy=False)
    warnings = [*_shortfall(chosen, record, metric), *_too_noisy(noise, threshold),
                *cut_off(chosen, trials, SCANNED, threshold, host.config.seed or 0),
                *margin_warnings(chosen, trials, _confirmed(host.confirmations, metric),
                                 SCANNED, threshold, noise)]
    return ConfirmVerdict(chosen, record["figures"], tuple(notes), tuple(warnings),
                          runner_up)


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


def _confirmed(confirmations: list[dict], metric: str) -> list[tuple[dict, float]]:
    """(parameters, figure) of each confirming launch that passed, in the order they ran."""
    readings = [(r["params"], confirmed_reading(r, metric)) for r in confirmations
                if r.get("ok")]
    return [(params, reading.value) for params, reading in readings if reading is not None]


def _too_noisy(noise: dict | None, threshold: float) -> list[str]:
    """The warning when the tune's measured noise is above the plateau threshold."""
    if not noise_above(noise, threshold):
        return []
    return [f"the noise measured on the {noise['values']} configurations read more than once "
            f"({noise['windows']} readings) is a CV of {noise['cv']:.1%}, above the "
            f"{threshold:.0%} plateau threshold: at this noise the best trial may be a lucky "
            "window (tune again on a quieter machine, with longer windows or "
            "tune.repeats > 1)"]


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
    if not fell_short(confirmed, scanned):
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
    outcome = host.run_one(trial_recipe(host.loaded, params, "tune confirmation"),
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
