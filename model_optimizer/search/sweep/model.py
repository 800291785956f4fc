"""The sweep's data: its config (the recipe's ``sweep`` section and the knob's value grid),
the measured :class:`Point` s, the strategy's :class:`Decision` s, and the grid arithmetic
(rounding onto ``multiple_of`` / integers / float decimals, the growth schedule).

Pure: no I/O. The strategy that reads these is ``search/sweep/strategy.py``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from model_optimizer.errors import UsageError
from model_optimizer.recipe.sweep_rules import DEFAULT_PARAM, start_above_max
from model_optimizer.search.core.knobs import FLOAT_DECIMALS, FLOAT_KNOBS
from model_optimizer.search.sweep.decide import PHASE_REMEASURE

PHASE_GROW = "grow"
PHASE_BISECT = "bisect"
PHASE_CATEGORICAL = "categorical"
PHASES = (PHASE_GROW, PHASE_BISECT, PHASE_CATEGORICAL, PHASE_REMEASURE)

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_SKIPPED = "skipped"
STATUSES = (STATUS_OK, STATUS_FAILED, STATUS_SKIPPED)

#: failure classes meaning "does not fit in memory" (engine.classify.MEMORY_CLASSES + planner)
MEMORY_FAILURE_KINDS = frozenset({"oom", "kv_cache_too_small", "planner", "kv_cache_full"})

STOP_RULES = (
    "plateau", "regression", "memory", "failure", "slo", "preemption", "max", "budget",
    "exhausted",
)

#: recipe ``sweep`` keys that belong to the loop (repeats, time budget, confirmation run)
#: max_num_seqs is searched to 1/8 of its value: never 120 against 121
RELATIVE_RESOLUTION = 0.125

LOOP_KEYS = frozenset({"repeats", "budget", "confirm_duration_s", "objective_class",
                       "remeasure_rounds", "strategy"})


class SweepConfigError(UsageError, ValueError):
    """A sweep config the strategy cannot search (no start, start above max, growth <= 1...).

    A ValueError for library callers; a UsageError so the CLI prints it without a traceback.
    """


@dataclass
class SweepConfig:
    """How one knob is searched: the recipe's ``sweep`` section plus the knob's value grid."""

    param: str
    start: float | None
    growth: float = 2.0
    step: float | None = None
    max: float | None = None
    values: list | None = None
    plateau_threshold: float = 0.05
    resolution: float = 1.0
    integer: bool = True
    multiple_of: int | None = None
    max_launches: int | None = None
    #: bisection stops when ``high - low <= relative_resolution * high`` too; None: the
    #: default of the knob (:data:`RELATIVE_RESOLUTION` for max_num_seqs, else 0)
    relative_resolution: float | None = None

    def __post_init__(self) -> None:
        problems = _config_problems(self)
        if problems:
            raise SweepConfigError(f"sweep of {self.param}: " + "; ".join(problems))

    @property
    def gap(self) -> float:
        """The relative bracket gap below which bisection stops (see ``relative_resolution``)."""
        if self.relative_resolution is not None:
            return self.relative_resolution
        return RELATIVE_RESOLUTION if self.param == "max_num_seqs" else 0.0

    @property
    def categorical(self) -> bool:
        """True when the knob is searched over explicit ``values``."""
        return self.values is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form (the inverse of :meth:`from_dict`)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepConfig:
        """Build from :meth:`to_dict` output; unknown keys are an error."""
        _reject_unknown_keys(cls, data)
        return cls(**data)

    @classmethod
    def from_recipe(
        cls, sweep: dict[str, Any], *, integer: bool | None = None,
        multiple_of: int | None = None,
    ) -> SweepConfig:
        """Build from a resolved recipe ``sweep`` section, dropping the loop's own keys.

        ``integer`` defaults to False for the knobs in :data:`FLOAT_KNOBS`, True otherwise.
        """
        data = {key: value for key, value in sweep.items() if key not in LOOP_KEYS}
        data.setdefault("param", DEFAULT_PARAM)
        data.setdefault("start", None)
        if integer is None:
            integer = data["param"] not in FLOAT_KNOBS
        return cls.from_dict({**data, "integer": integer, "multiple_of": multiple_of})


def _config_problems(config: SweepConfig) -> list[str]:
    """Everything wrong with a config, as short phrases (empty when valid)."""
    if config.values is not None:
        return [] if config.values else ["values must not be empty"]
    problems = []
    if config.start is None or config.start <= 0:
        problems.append("a numeric sweep needs start > 0")
    if config.step is None and config.growth <= 1:
        problems.append("growth must be > 1 (or set step)")
    if config.step is not None and config.step <= 0:
        problems.append("step must be > 0")
    if config.multiple_of is not None and config.multiple_of < 1:
        problems.append("multiple_of must be >= 1")
    if config.resolution <= 0:
        problems.append("resolution must be > 0")
    if config.relative_resolution is not None and not 0 <= config.relative_resolution < 1:
        problems.append("relative_resolution must be within [0, 1)")
    if not 0 <= config.plateau_threshold <= 1:
        problems.append("plateau_threshold must be within [0, 1]")
    if config.max_launches is not None and config.max_launches < 1:
        problems.append("max_launches must be >= 1")
    above = None if problems or config.max is None else \
        start_above_max(round_value(config, config.start), cap_value(config))
    if above is not None:
        problems.append(f"{above.message} (after rounding)")
    return problems


@dataclass
class Point:
    """One tried value, after all its repeats."""

    value: float | str | bool
    phase: str
    status: str
    metric_samples: list[float]
    slo_met: bool | None = None
    preemptions: float = 0
    failure_kind: str | None = None
    launches: int = 0
    run_ids: list[str] = field(default_factory=list)
    half_width: float | None = None   # 95% half-width of the window's metric (steady state)
    slo_ratios: list[float] = field(default_factory=list)  # per window: worst latency / bound

    @property
    def metric(self) -> float | None:
        """Median of the samples (the objective compared between points), None if none."""
        return statistics.median(self.metric_samples) if self.metric_samples else None

    @property
    def spread(self) -> tuple[float, float] | None:
        """(min, max) of the samples, None if none."""
        if not self.metric_samples:
            return None
        return min(self.metric_samples), max(self.metric_samples)

    @property
    def relative_spread(self) -> float:
        """(max - min) / median: 0 for one sample, infinite when the median is 0 but not the max."""
        if not self.metric_samples:
            return 0.0
        low, high = self.spread
        if high == low:
            return 0.0
        return (high - low) / self.metric if self.metric > 0 else math.inf

    @property
    def acceptable(self) -> bool:
        """Measured fine: status ok, a metric, no SLO miss, no preemption."""
        return (
            self.status == STATUS_OK and self.metric is not None
            and self.slo_met is not False and self.preemptions == 0
        )

    @property
    def unfit(self) -> bool:
        """The server failed to run this value or the planner said it cannot fit."""
        return self.status in (STATUS_FAILED, STATUS_SKIPPED)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form (the inverse of :meth:`from_dict`)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Point:
        """Build from :meth:`to_dict` output; unknown keys are an error."""
        _reject_unknown_keys(cls, data)
        data = dict(data)
        data["metric_samples"] = [float(sample) for sample in data.get("metric_samples", [])]
        data["run_ids"] = list(data.get("run_ids", []))
        data["slo_ratios"] = [float(ratio) for ratio in data.get("slo_ratios", [])]
        return cls(**data)


@dataclass
class Decision:
    """What to measure next; ``value`` None means the search is finished.

    ``stop_rule`` is set on the final decision only: the rule that stopped growth (or
    ``budget`` / ``exhausted``). :func:`growth_stop` gives it at any time.
    """

    value: float | str | bool | None
    phase: str | None
    reason: str
    stop_rule: str | None = None

    @property
    def finished(self) -> bool:
        """True when there is nothing left to measure."""
        return self.value is None

    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable form (the inverse of :meth:`from_dict`)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Decision:
        """Build from :meth:`to_dict` output; unknown keys are an error."""
        _reject_unknown_keys(cls, data)
        return cls(**data)


def _reject_unknown_keys(cls: type, data: dict[str, Any]) -> None:
    unknown = sorted(set(data) - {item.name for item in fields(cls)})
    if unknown:
        raise SweepConfigError(f"{cls.__name__}: unknown keys {unknown}")


# --- value grid ---------------------------------------------------------------------------


def round_value(config: SweepConfig, raw: float) -> float:
    """Round a raw candidate to the knob's grid (multiple_of, integer or float decimals)."""
    if config.multiple_of is not None:
        step = config.multiple_of
        return step * max(1, math.floor(raw / step + 0.5))
    if config.integer:
        return max(1, math.floor(raw + 0.5))
    return round(raw, FLOAT_DECIMALS)


def cap_value(config: SweepConfig) -> float | None:
    """``max`` rounded down onto the grid (the largest value growth may try), None if unset."""
    if config.max is None:
        return None
    if config.multiple_of is not None:
        return config.multiple_of * math.floor(config.max / config.multiple_of)
    if config.integer:
        return math.floor(config.max)
    return round(config.max, FLOAT_DECIMALS)


def grid_quantum(config: SweepConfig) -> float:
    """The smallest increase between two grid values."""
    if config.multiple_of is not None:
        return config.multiple_of
    return 1 if config.integer else 10.0 ** -FLOAT_DECIMALS


def grow_after(config: SweepConfig, value: float) -> float | None:
    """The growth value after ``value``: next step, bumped if rounding stalls, capped at max."""
    raw = value + config.step if config.step is not None else value * config.growth
    candidate = round_value(config, raw)
    if candidate <= value:
        candidate = round_value(config, value + grid_quantum(config))
    cap = cap_value(config)
    if cap is not None and candidate > cap:
        return cap if cap > value else None
    return candidate


def grow_sequence(config: SweepConfig, *, limit: int = 64) -> list[float]:
    """The full growth schedule from ``start`` up to ``max`` (at most ``limit`` values).

    Categorical configs return their ``values``. Without ``max`` the schedule is unbounded,
    so only its first ``limit`` values are returned.
    """
    if config.categorical:
        return list(config.values)
    sequence = [round_value(config, config.start)]
    while len(sequence) < limit:
        following = grow_after(config, sequence[-1])
        if following is None:
            break
        sequence.append(following)
    return sequence


def relative_grid(low: int, high: int, fraction: float = RELATIVE_RESOLUTION) -> list[int]:
    """Integers from ``low`` to ``high`` at most ``fraction`` of the value apart: every
    integer while 1 is that fine, then powers of two with ``1/fraction`` steps between
    (fraction 1/8: ..., 8, 9, ..., 16, 18, ..., 32, 36, ..., 64, 72, ...), and ``high``."""
    values, value = [], max(1, int(low))
    while value < high:
        values.append(value)
        power = 2 ** max(0, math.floor(math.log2(value)))
        value += max(1, int(power * fraction))
    return values + [int(high)]
