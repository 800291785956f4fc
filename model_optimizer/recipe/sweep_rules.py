"""The sweep section's rules, each once: the strategy names, the default knob, which knobs a
sweep may move, and start <= max.

The typed spec (``spec.SweepSpec``), the recipe's cross-field rules (``rules.py``), the sweep's
config and flags (``search/sweep/model.py``, ``search/sweep/flags.py``, ``search/sweep/probe.py``)
and ``mopt sweep --help`` read them from here; ``tests/unit/search/sweep/test_sweep_rules.py``
holds the JSON Schema (``schemas/recipe.v1.json``, which cannot import them) to the same lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from model_optimizer.recipe.knobs import knob_names
from model_optimizer.recipe.validate import did_you_mean

#: ``sweep.strategy`` / ``mopt sweep --strategy``
StrategyName = Literal["auto", "probe-scan", "probe-fit", "relaunch"]
STRATEGIES: tuple[str, ...] = get_args(StrategyName)
AUTO, RELAUNCH = "auto", "relaunch"
#: what ``auto`` resolves to where a scan is valid: the strategy the search simulator's table
#: favours (docs/benchmarks/search-simulator.md; docs/sweep.md, "Why auto is probe-fit")
AUTO_SCAN = "probe-fit"
#: the strategies that scan one live server (probe-fit: the fitted knee, ``search/sweep/fitscan``)
SCANNING: tuple[str, ...] = ("probe-scan", "probe-fit")
#: what each strategy does, in the order of :data:`STRATEGIES` (the CLI help)
STRATEGY_HELP: dict[str, str] = {
    "auto": "probe-fit where a scan is valid, else relaunch",
    "probe-scan": "launch once at the ceiling and scan the concurrency on that server, then "
                  "launch once to confirm (max_num_seqs with workload.concurrency null and "
                  "a closed loop only)",
    "probe-fit": "the same server scanned up and down, the knee from a curve fitted over "
                 "every window, with its band and a resolved verdict",
    "relaunch": "one launch per value",
}

#: ``sweep.param`` when the recipe names none
DEFAULT_PARAM = "max_num_seqs"
#: engine knobs a sweep may move: numeric ones grow, categorical ones take ``sweep.values``
NUMERIC_KNOBS = knob_names("numeric")
CATEGORICAL_KNOBS = knob_names("categorical")
SWEEPABLE = NUMERIC_KNOBS + CATEGORICAL_KNOBS


@dataclass(frozen=True)
class SweepProblem:
    """What is wrong and how to fix it (a recipe diagnostic or a usage error)."""

    message: str
    hint: str

    def __str__(self) -> str:
        return f"{self.message}; {self.hint}"


def param_problem(param: str, values: object) -> SweepProblem | None:
    """Why ``param`` cannot be swept with ``values`` (None when it can)."""
    if param not in SWEEPABLE:
        return SweepProblem(f"'{param}' is not an engine knob mopt can sweep",
                            did_you_mean(param, list(SWEEPABLE))
                            or f"choose one of {', '.join(SWEEPABLE)}")
    if param in CATEGORICAL_KNOBS and not values:
        example = "auto,fp8" if param == "kv_cache_dtype" else "false,true"
        return SweepProblem(f"'{param}' is categorical and needs the values to try",
                            f"give sweep.values or --values, e.g. {example}")
    return None


def start_above_max(start: float | None, maximum: float | None) -> SweepProblem | None:
    """The problem when a sweep would start above its largest value (None when it does not)."""
    if start is None or maximum is None or maximum >= start:
        return None
    return SweepProblem(f"start {start} is above max {maximum}", "swap them or raise max")


def strategy_help() -> str:
    """``--strategy``'s help: every name with what it does."""
    return ("; ".join(f"{name}: {STRATEGY_HELP[name]}" for name in STRATEGIES)
            + f". Default: the recipe's sweep.strategy ({AUTO} when it sets none).")
