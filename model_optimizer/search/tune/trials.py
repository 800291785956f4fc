"""Reading a study's trials for ``mopt tune``: same configurations, counts, summaries. Pure
functions of optuna's frozen trials; the loop and the outputs share them.
"""

from __future__ import annotations

import optuna
from optuna.trial import FrozenTrial, TrialState

from model_optimizer.search.tune.space import same_value

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
#: user attributes a trial that repeats a finished configuration copies from it
COPIED_ATTRS = ("status", "failure_kind", "reason", "log_excerpt", "figures", "samples",
                "half_width", "slo_met", "feasible", "hardware", "machine_measured")


def same_params(a: dict, b: dict) -> bool:
    """True when two trials' parameters are the same configuration (True is not 1)."""
    return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)


def finished_count(trials: list[FrozenTrial]) -> int:
    """How many trials of the budget finished (measured, failed as data, or pruned; the
    levels a scanning trial added do not count)."""
    return sum(1 for t in trials if t.state in FINISHED and not t.user_attrs.get("scan_level"))


def distinct_configurations(trials: list[FrozenTrial]) -> int:
    """How many different configurations the finished trials tried."""
    seen: list[dict] = []
    for trial in trials:
        if trial.state in FINISHED and not any(same_params(trial.params, o) for o in seen):
            seen.append(trial.params)
    return len(seen)


def state_counts(trials: list[FrozenTrial]) -> dict:
    """Trials by optuna state (``complete``, ``pruned``, ...) and the launches they made."""
    counts: dict[str, int] = {}
    for trial in trials:
        key = trial.state.name.lower()
        counts[key] = counts.get(key, 0) + 1
    counts["launches"] = sum(t.user_attrs.get("launches", 0) for t in trials)
    counts["windows"] = sum(t.user_attrs.get("windows", len(t.user_attrs.get("run_ids") or []))
                            for t in trials)
    return counts


def describe_outcomes(trials: list[FrozenTrial]) -> str:
    """Why the finished trials were not feasible, in words: ``2 failed: oom, 1 ...``."""
    kinds: dict[str, int] = {}
    for trial in trials:
        if "status" not in trial.user_attrs:
            continue
        attrs = trial.user_attrs
        key = ("infeasible (SLO)" if attrs["status"] == "ok"
               else f"{attrs['status']}: {attrs.get('failure_kind')}")
        kinds[key] = kinds.get(key, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "no trial finished"


def trial_summary(trial: FrozenTrial) -> dict:
    """The JSON summary of one trial (the best one in the outcome)."""
    attrs = trial.user_attrs
    return {"number": trial.number, "params": dict(trial.params), "values": trial.values,
            "figures": attrs.get("figures"), "machine": attrs.get("machine"),
            "run_ids": attrs.get("run_ids"), "duplicate_of": attrs.get("duplicate_of")}


def unique_seeds(seeds: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """The first ``(tag, params)`` of each distinct configuration, in order."""
    unique: list[tuple[str, dict]] = []
    for tag, params in seeds:
        if not any(same_params(params, other) for _, other in unique):
            unique.append((tag, params))
    return unique


def finished_twin(study: optuna.Study, params: dict, number: int) -> FrozenTrial | None:
    """A finished trial other than ``number`` that measured (or pruned) ``params``."""
    for other in study.get_trials(deepcopy=False, states=FINISHED):
        if other.number != number and "status" in other.user_attrs \
                and same_params(other.params, params):
            return other
    return None


def copy_twin(study: optuna.Study, trial: optuna.Trial, twin: FrozenTrial) -> dict:
    """Tell ``trial`` its ``twin``'s result (no launch); returns the trial's record."""
    attrs = {k: twin.user_attrs[k] for k in COPIED_ATTRS if k in twin.user_attrs}
    attrs.update({"duplicate_of": twin.number, "run_ids": [], "launches": 0})
    for key, value in attrs.items():
        trial.set_user_attr(key, value)
    for key, value in twin.constraints.items():
        trial.set_constraint(key, value)
    if twin.state == TrialState.PRUNED:
        study.tell(trial, state=TrialState.PRUNED)
    else:
        study.tell(trial, list(twin.values))
    return {"number": trial.number, "params": dict(twin.params), **attrs,
            "values": twin.values}


def tell_verdict(study: optuna.Study, trial: optuna.Trial, params: dict,
                 verdict: tuple[dict, dict, list[float] | None],
                 extra: dict | None = None) -> dict:
    """Record a trial's ``verdict`` (``evaluate.trial_verdict``: attributes, constraints,
    values; ``extra`` attributes added) on ``trial`` and tell the study; returns the
    trial's record."""
    attrs, constraints, values = verdict
    attrs.update(extra or {})
    for key, value in attrs.items():
        trial.set_user_attr(key, value)
    for key, value in constraints.items():  # before tell: the sampler reads them
        trial.set_constraint(key, value)
    if values is None:
        study.tell(trial, state=TrialState.PRUNED)
    else:
        study.tell(trial, values)
    return {"number": trial.number, "params": params, **attrs, "values": values,
            "constraints": constraints}
