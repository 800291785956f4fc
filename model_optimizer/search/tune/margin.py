"""Is a scanning tune's written configuration ahead of every other combination of the knobs
it does not scan by the margin?

The tune's winner is the best of a few dozen single windows; under the simulator's CV 5% it
was written "resolved" at 0.89-0.90 of the true best with the wrong block_size by a hair
(2026-12-07), because nothing asked whether the other block_sizes could be told apart from
it. The question is the sweep's margin (the rule defined once, ``search/core/margin.py``):
the choice must be shown to be at least ``1 - 2t`` (0.90 at ``t`` = 5%) of each feasible
configuration of every **other** combination of the non-scanned knobs, at one-sided 95%
(the levels of its own combination are the cut-range check's, ``search/tune/cutoff.py``).

Which windows count:

- **the choice's**: its own confirming launch, and every scan window of its configuration
  but the one that ranked it among the candidates: that window was the highest of many, so
  it was selected for reading high and does not vouch for itself (the sweep's knee does not
  either). At a measured noise of zero every window counts.
- **a rival's**: every window of its configuration (scan windows, its confirming launch when
  it was the runner-up); a copied twin repeats its twin's figure and is left out.
- **pairs**: two confirming launches run back to back, one of each, are a pair (drift hits
  both); the paired bound needs two or more, which one confirmation each never gives, so
  today the bound is the unpaired one, at the tune's pooled noise
  (:func:`~model_optimizer.search.tune.confirm.tune_noise`).

A combination whose weakest bound falls short makes the choice **not resolved**, naming that
configuration and its bound.
"""

from __future__ import annotations

from collections.abc import Sequence

from optuna.trial import FrozenTrial, TrialState

from model_optimizer.search.core.margin import Comparison, Margin, compare, margin_share
from model_optimizer.search.core.sequential import adjacent_pairs
from model_optimizer.search.tune.trials import same_params


def tune_margin(chosen: FrozenTrial, trials: Sequence[FrozenTrial],
                confirmed: Sequence[tuple[dict, float]], scanned: str, threshold: float,
                noise: dict | None) -> Margin | None:
    """``chosen``'s margin against each feasible configuration of the other combinations
    of the knobs but ``scanned``; ``confirmed``: the (parameters, figure) of each confirming
    launch that passed, in the order they ran. None when it cannot be judged (no measured
    noise)."""
    if noise is None:
        return None
    readings = _readings(trials, confirmed)
    exact = noise["cv"] == 0
    own = [value for number, params, value in readings if same_params(params, chosen.params)
           and (exact or number != chosen.number)]
    share = margin_share(threshold)
    if not own:
        return Margin(dict(chosen.params), share, None)
    series = [(_key(params), value) for number, params, value in readings if number is None]
    comparisons = []
    for params in _rivals(chosen, trials, scanned):
        theirs = [value for _, other, value in readings if same_params(other, params)]
        if theirs:
            pairs = adjacent_pairs(series, _key(chosen.params), _key(params))
            comparisons.append(compare(params, own, theirs, noise, pairs))
    return Margin(dict(chosen.params), share, tuple(comparisons))


def margin_warnings(chosen: FrozenTrial, trials: Sequence[FrozenTrial],
                    confirmed: Sequence[tuple[dict, float]], scanned: str,
                    threshold: float, noise: dict | None) -> list[str]:
    """One warning per other combination the choice is not shown ahead of by the margin
    (:func:`tune_margin`), weakest first; one when the margin cannot be judged."""
    margin = tune_margin(chosen, trials, confirmed, scanned, threshold, noise)
    share = margin_share(threshold)
    if margin is None:
        return [f"the margin over the other combinations of the knobs but {scanned} cannot "
                "be judged: no configuration was read twice, so the tune's noise is unknown "
                "(tune again with tune.repeats > 1)"]
    if margin.comparisons is None:
        return [f"trial {chosen.number} {dict(chosen.params)} has no window beyond the one "
                f"that ranked it, so its margin of {share:.0%} over the other combinations "
                "of the knobs cannot be shown"]
    weakest: dict[str, Comparison] = {}
    for comparison in margin.short():
        weakest.setdefault(repr(_combination(comparison.value, scanned)), comparison)
    cv = float((noise or {}).get("cv") or 0.0)  # a margin is judged only at a known noise
    return [_words(chosen, c, scanned, share, cv) for c in weakest.values()]


def _words(chosen: FrozenTrial, comparison: Comparison, scanned: str, share: float,
           cv: float) -> str:
    """The warning for one combination the choice is not told apart from."""
    combination = _combination(comparison.value, scanned)
    return (f"trial {chosen.number} {dict(chosen.params)} is not shown to be at least "
            f"{share:.0%} of {comparison.value} (one-sided 95% lower bound of the ratio "
            f"{comparison.bound:.3f}, at the tune's noise CV {cv:.1%}): the tune "
            f"cannot tell {combination} apart from the choice's "
            f"{_combination(chosen.params, scanned)} (sweep {scanned} with each, or tune "
            "again with longer windows)")


def _readings(trials: Sequence[FrozenTrial], confirmed: Sequence[tuple[dict, float]]
              ) -> list[tuple[int | None, dict, float]]:
    """(trial number, parameters, figure) of every feasible scan window (a copied twin
    left out), then (None, parameters, figure) of every confirming launch, in order."""
    return [(t.number, dict(t.params), float(t.values[0])) for t in trials
            if t.state == TrialState.COMPLETE and t.values and t.user_attrs.get("feasible")
            and "duplicate_of" not in t.user_attrs] + [
        (None, dict(params), float(value)) for params, value in confirmed]


def _rivals(chosen: FrozenTrial, trials: Sequence[FrozenTrial], scanned: str) -> list[dict]:
    """The feasible configurations of every other combination of the knobs but
    ``scanned``, each once."""
    mine = _combination(chosen.params, scanned)
    rivals: list[dict] = []
    for trial in trials:
        if trial.state != TrialState.COMPLETE or not trial.user_attrs.get("feasible"):
            continue
        if same_params(_combination(trial.params, scanned), mine) or any(
                same_params(trial.params, other) for other in rivals):
            continue
        rivals.append(dict(trial.params))
    return rivals


def _combination(params: dict, scanned: str) -> dict:
    """The knobs of ``params`` but ``scanned``."""
    return {k: v for k, v in params.items() if k != scanned}


def _key(params: dict) -> str:
    """A configuration as a key of :func:`adjacent_pairs`' series."""
    return repr(sorted((k, repr(v)) for k, v in params.items()))
