"""The search space of ``mopt tune``: the recipe's ``tune`` section as optuna suggestions, the
recipe one trial's parameters give (typed values, ``LoadedRecipe.varied``), the exhaustive
grid, and the seed trials (the recipe's own values, the planner's suggestion).

Pure: no processes, no storage. The recipe's schema and cross-field rules have already
checked every range (``recipe/rules.py``), so nothing here re-validates them.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from model_optimizer.errors import UsageError
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.search.core.knobs import FLOAT_DECIMALS, describe, engine_values

#: tune.objective -> the run metric it maximizes
OBJECTIVES = {"throughput": "qps", "goodput": "goodput_qps", "tokens_per_s": "output_tok_s"}
#: tune.second_objective -> the run metric it minimizes
SECOND_OBJECTIVES = {"ttft_p99": "ttft_p99_ms"}
SAMPLERS = ("tpe", "random", "grid")
STRATEGIES = ("auto", "scan", "relaunch")
GRID_LIMIT = 10_000


def same_value(a: Any, b: Any) -> bool:
    """Equality that tells True from 1 (optuna and Python do not)."""
    return (isinstance(a, bool) == isinstance(b, bool)) and a == b


@dataclass(frozen=True)
class ParamSpec:
    """One tuned engine knob: a numeric range or a list of choices."""

    name: str
    kind: str                      # int | int_log | float | float_log | categorical
    low: float | None = None
    high: float | None = None
    step: float | None = None
    choices: tuple = ()

    @classmethod
    def from_recipe(cls, name: str, spec: dict) -> ParamSpec:
        """From one entry of the recipe's ``tune.params``."""
        kind = spec["type"]
        integer = kind.startswith("int")

        def number(value: float | None) -> float | None:
            return None if value is None else (int(value) if integer else float(value))
        return cls(name, kind, number(spec.get("low")), number(spec.get("high")),
                   number(spec.get("step")), tuple(spec.get("choices") or ()))

    @property
    def log(self) -> bool:
        """True for the log-uniform kinds."""
        return self.kind.endswith("_log")

    def suggest(self, trial) -> Any:
        """Ask an optuna trial for this knob's value."""
        if self.kind == "categorical":
            return trial.suggest_categorical(self.name, list(self.choices))
        if self.kind.startswith("int"):
            return trial.suggest_int(self.name, self.low, self.high, step=self.step or 1,
                                     log=self.log)
        return trial.suggest_float(self.name, self.low, self.high, step=self.step, log=self.log)

    def contains(self, value: Any) -> bool:
        """True when ``value`` is a point of this knob's space."""
        if self.kind == "categorical":
            return any(same_value(value, choice) for choice in self.choices)
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if not self.low <= value <= self.high:
            return False
        if self.kind.startswith("int"):
            return float(value).is_integer() and (value - self.low) % (self.step or 1) == 0
        if self.step:
            ratio = (value - self.low) / self.step
            return math.isclose(ratio, round(ratio), abs_tol=1e-9)
        return True

    def values(self) -> list | None:
        """Every value of a finite space in order (None for a continuous range).

        int_log ranges are enumerated as ``low * 2**k`` up to ``high`` (plus ``high``).
        """
        if self.kind == "categorical":
            return list(self.choices)
        if self.kind == "int":
            return list(range(self.low, self.high + 1, self.step or 1))
        if self.kind == "int_log":
            out = [self.low * 2 ** k for k in range(64) if self.low * 2 ** k <= self.high]
            return out if out[-1] == self.high else [*out, self.high]
        if self.kind == "float" and self.step:
            count = math.floor((self.high - self.low) / self.step + 1e-9) + 1
            return [round(self.low + i * self.step, FLOAT_DECIMALS) for i in range(count)]
        return None

    def size(self) -> int | None:
        """How many distinct values optuna may suggest (None for a continuous range)."""
        if self.kind == "int_log":
            return self.high - self.low + 1
        values = self.values()
        return None if values is None else len(values)

    def largest_at_most(self, limit: float) -> Any:
        """The largest value of the space not above ``limit`` (None when there is none)."""
        if self.kind == "categorical":
            numeric = [c for c in self.choices if isinstance(c, int | float)
                       and not isinstance(c, bool) and c <= limit]
            return max(numeric) if numeric else None
        top = min(self.high, limit)
        if top < self.low:
            return None
        step = self.step or (1 if self.kind.startswith("int") else None)
        if step and not self.log:
            top = self.low + math.floor((top - self.low) / step + 1e-9) * step
        return int(top) if self.kind.startswith("int") else round(top, FLOAT_DECIMALS)


@dataclass(frozen=True)
class TuneFlags:
    """What a caller asks of a tune beyond its recipe (``mopt tune``'s flags); each field
    None leaves the recipe's ``tune`` section as it is."""

    n_trials: int | None = None
    max_minutes: float | None = None
    sampler: str | None = None
    seed: int | None = None
    strategy: str | None = None    # auto | scan | relaunch

    def given(self) -> dict:
        """The tune-section keys given (not None), by their recipe names."""
        return {key: value for key, value in vars(self).items() if value is not None}


@dataclass
class TuneConfig:
    """What one tune searches and how: the recipe's ``tune`` section, CLI flags winning."""

    params: list[ParamSpec]
    objective: str = "throughput"
    second_objective: str | None = None
    n_trials: int = 12
    max_minutes: float | None = None
    sampler: str = "tpe"
    seed: int = 0
    repeats: int = 1
    objective_class: str | None = None
    strategy: str = "auto"         # auto | scan | relaunch (max_num_seqs levels on one server)
    names: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.names = [spec.name for spec in self.params]

    @classmethod
    def from_recipe(cls, tune: dict, flags: TuneFlags | None = None) -> TuneConfig:
        """From a resolved recipe's ``tune`` section; the flags given override it."""
        section = {**tune, **(flags or TuneFlags()).given()}
        if not section["params"]:
            raise UsageError("the recipe's tune.params is empty: list the knobs to search, "
                             "e.g. tune: {params: {max_num_seqs: {type: int_log, low: 1, "
                             "high: 256}}}")
        if section["sampler"] not in SAMPLERS:
            raise UsageError(f"--sampler {section['sampler']}: choose one of "
                             f"{', '.join(SAMPLERS)}")
        if (section.get("strategy") or "auto") not in STRATEGIES:
            raise UsageError(f"tune.strategy {section['strategy']}: choose one of "
                             f"{', '.join(STRATEGIES)}")
        params = [ParamSpec.from_recipe(name, spec) for name, spec in section["params"].items()]
        return cls(params, section["objective"], section.get("second_objective"),
                   section["n_trials"], section.get("max_minutes"), section["sampler"],
                   section["seed"], section["repeats"], section.get("objective_class"),
                   section.get("strategy") or "auto")

    @property
    def metric(self) -> str:
        """The run metric maximized (qps, goodput_qps, output_tok_s; ``class:metric`` for
        one request class's figure, see ``load.classes.figure``)."""
        base = OBJECTIVES[self.objective]
        return f"{self.objective_class}:{base}" if self.objective_class else base

    @property
    def second_metric(self) -> str | None:
        """The run metric minimized as the second objective, if any."""
        return SECOND_OBJECTIVES.get(self.second_objective or "")

    @property
    def directions(self) -> list[str]:
        """optuna study directions."""
        return ["maximize", "minimize"] if self.second_metric else ["maximize"]

    def space_size(self) -> int | None:
        """Number of distinct configurations (None when a range is continuous)."""
        sizes = [spec.size() for spec in self.params]
        return None if None in sizes else math.prod(sizes)

    def grid(self) -> list[dict]:
        """Every combination, first knob slowest (the ``grid`` sampler's order)."""
        values = [spec.values() for spec in self.params]
        if None in values or math.prod(len(v) for v in values) > GRID_LIMIT:
            raise UsageError(f"sampler grid needs a finite space of at most {GRID_LIMIT:,} "
                             "combinations: give float ranges a step, or narrow the ranges")
        return [dict(zip(self.names, combo, strict=True)) for combo in itertools.product(*values)]

    def fingerprint(self) -> dict:
        """What workers joining one study must agree on: the space and the objectives."""
        data = self.to_dict()
        return {k: data.get(k) for k in ("params", "objective", "second_objective",
                                          "objective_class")}

    def to_dict(self) -> dict:
        """JSON form for state.json."""
        return {"params": {s.name: {"type": s.kind, "low": s.low, "high": s.high,
                                    "step": s.step, "choices": list(s.choices) or None}
                           for s in self.params},
                "objective": self.objective, "second_objective": self.second_objective,
                "n_trials": self.n_trials, "max_minutes": self.max_minutes,
                "sampler": self.sampler, "seed": self.seed, "repeats": self.repeats,
                "objective_class": self.objective_class, "strategy": self.strategy}

    @classmethod
    def from_dict(cls, data: dict) -> TuneConfig:
        """Inverse of :meth:`to_dict`."""
        return cls.from_recipe(data)


def trial_recipe(loaded: LoadedRecipe, params: dict, source: str = "tune trial"
                 ) -> LoadedRecipe:
    """``loaded`` with one trial's knob values set and checked (RecipeError: a rule refuses
    them), recorded as from ``source`` (a null workload.concurrency follows max_num_seqs in
    the runner, so the batch is filled at every trial)."""
    return loaded.varied(engine_values(params), f"{source} {describe(params)}")


def recipe_seed(config: TuneConfig, engine: dict) -> dict:
    """The recipe's current values of the tuned knobs that lie inside the space."""
    return {spec.name: engine[spec.name] for spec in config.params
            if engine.get(spec.name) is not None and spec.contains(engine[spec.name])}


def planner_seed(config: TuneConfig, engine: dict, max_seqs_no_preemption: int) -> dict | None:
    """The recipe's values with max_num_seqs raised (or lowered) to the largest value of the
    space the planner says runs without preemption; None when max_num_seqs is not tuned."""
    spec = next((s for s in config.params if s.name == "max_num_seqs"), None)
    if spec is None:
        return None
    value = spec.largest_at_most(max_seqs_no_preemption)
    if value is None:
        return None
    return {**recipe_seed(config, engine), "max_num_seqs": value}
