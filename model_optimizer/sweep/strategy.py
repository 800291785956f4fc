"""The pure search strategy of ``mopt sweep``: which value of one engine knob to measure next.

The loop that launches vLLM lives elsewhere; it calls :func:`next_value` with the sweep
config and the history of measured :class:`Point` s and measures whatever value the returned
:class:`Decision` names, until the decision's value is ``None``. Everything here is a
deterministic function of ``(config, history)``: no I/O, no processes, no clock. Replaying a
stored history therefore reproduces every decision, which is what makes ``--resume`` safe.

Numeric knobs are searched in two phases.

1. **Growth** from ``start``: ``v * growth`` (or ``v + step``), rounded to an integer or to
   ``multiple_of`` (floats to 6 decimals), bumped by one grid step when rounding stalls,
   capped at ``max`` (``max``, rounded down onto the grid, is tried once). The growth points
   are replayed in order and growth stops at the first one that shows (see :func:`growth_stop`):

   - ``memory``: failed with oom / kv_cache_too_small / planner, or skipped by the planner;
     ``failure``: failed for any other reason. Either way that value is a ceiling: nothing at
     or above the lowest failed or skipped value is ever proposed again.
   - ``slo``: ``slo_met`` is False; ``preemption``: ``preemptions > 0``.
   - against the previous growth point, with ``t = plateau_threshold`` and medians compared:
     a *gain* is a rise of at least ``t``; a *regression* (stop ``regression``) is a fall of
     more than ``t`` with disjoint sample ranges (current max < previous min, which one
     sample each reduces to the fall itself); anything else is a *flat* step. A flat step
     stops growth (``plateau``) unless the relative spread ``(max - min) / median`` of either
     point exceeds ``t``: then the difference is inside the noise and one more growth step is
     measured; two flat steps in a row (no gain in between) stop growth even when noisy.
   - ``max``: the last growth point is the cap.

2. **Bisection**, recomputed from all measured points on every call. ``best`` is the largest
   median among acceptable points; a point is *good* when acceptable with a median of at
   least ``(1 - t) * best``. Brackets are tried in this order:

   - *ceiling bracket* (A, C): A the largest acceptable value, provided it is the best and
     still gaining (at least ``t`` over the acceptable value below it, or none below); C the
     smallest measured value above A (necessarily unacceptable). A good midpoint's outcome can
     raise ``best``, so this runs first.
   - *knee bracket* (L, K): K the smallest good value, L the largest measured value below K.

   A bracket is closed when ``high - low <= resolution``, when the rounded midpoint falls on
   an end or a measured value, or when it is at or above a failed/skipped value. When both are
   closed (or absent) the search ends with the growth stop rule.

Categorical knobs (``values``) are tried in order. The budget ``max_launches`` ends any phase.
:func:`choose` picks the knee, not the raw maximum; :func:`fallback_candidates` lists what to
try when the sustained confirmation run rejects the chosen value.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from model_optimizer.errors import UsageError
from model_optimizer.search.knobs import FLOAT_DECIMALS, FLOAT_KNOBS

PHASE_GROW = "grow"
PHASE_BISECT = "bisect"
PHASE_CATEGORICAL = "categorical"
PHASES = (PHASE_GROW, PHASE_BISECT, PHASE_CATEGORICAL)

STATUS_OK = "ok"
STATUS_FAILED = "failed"
STATUS_SKIPPED = "skipped"
STATUSES = (STATUS_OK, STATUS_FAILED, STATUS_SKIPPED)

#: failure classes meaning "does not fit in memory" (engine.classify.MEMORY_CLASSES + planner)
MEMORY_FAILURE_KINDS = frozenset({"oom", "kv_cache_too_small", "planner"})

STOP_RULES = (
    "plateau", "regression", "memory", "failure", "slo", "preemption", "max", "budget",
    "exhausted",
)

#: recipe ``sweep`` keys that belong to the loop (repeats, time budget, confirmation run)
LOOP_KEYS = frozenset({"repeats", "max_minutes", "confirm_duration_s"})


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

    def __post_init__(self) -> None:
        problems = _config_problems(self)
        if problems:
            raise SweepConfigError(f"sweep of {self.param}: " + "; ".join(problems))

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
        data.setdefault("param", "max_num_seqs")
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
    if not 0 <= config.plateau_threshold <= 1:
        problems.append("plateau_threshold must be within [0, 1]")
    if config.max_launches is not None and config.max_launches < 1:
        problems.append("max_launches must be >= 1")
    if not problems and config.max is not None \
            and _cap(config) < _round_value(config, config.start):
        problems.append(f"start {config.start} is above max {config.max} (after rounding)")
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


def _round_value(config: SweepConfig, raw: float) -> float:
    """Round a raw candidate to the knob's grid (multiple_of, integer or float decimals)."""
    if config.multiple_of is not None:
        step = config.multiple_of
        return step * max(1, math.floor(raw / step + 0.5))
    if config.integer:
        return max(1, math.floor(raw + 0.5))
    return round(raw, FLOAT_DECIMALS)


def _cap(config: SweepConfig) -> float | None:
    """``max`` rounded down onto the grid (the largest value growth may try), None if unset."""
    if config.max is None:
        return None
    if config.multiple_of is not None:
        return config.multiple_of * math.floor(config.max / config.multiple_of)
    if config.integer:
        return math.floor(config.max)
    return round(config.max, FLOAT_DECIMALS)


def _grid_quantum(config: SweepConfig) -> float:
    """The smallest increase between two grid values."""
    if config.multiple_of is not None:
        return config.multiple_of
    return 1 if config.integer else 10.0 ** -FLOAT_DECIMALS


def _grow_after(config: SweepConfig, value: float) -> float | None:
    """The growth value after ``value``: next step, bumped if rounding stalls, capped at max."""
    raw = value + config.step if config.step is not None else value * config.growth
    candidate = _round_value(config, raw)
    if candidate <= value:
        candidate = _round_value(config, value + _grid_quantum(config))
    cap = _cap(config)
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
    sequence = [_round_value(config, config.start)]
    while len(sequence) < limit:
        following = _grow_after(config, sequence[-1])
        if following is None:
            break
        sequence.append(following)
    return sequence


# --- formatting ---------------------------------------------------------------------------


def _fmt_value(value: Any) -> str:
    if isinstance(value, float) and not isinstance(value, bool):
        return f"{value:g}"
    return str(value)


def _fmt_metric(metric: float | None, unit: str = "req/s") -> str:
    if metric is None:
        return "no metric"
    text = f"{metric:.1f}" if abs(metric) >= 1 else f"{metric:.3g}"
    return f"{text} {unit}"


def _fmt_pct(fraction: float) -> str:
    return f"{fraction * 100:.0f}%" if fraction * 100 >= 1 else f"{fraction * 100:.2g}%"


def _describe(point: Point) -> str:
    """Short evidence for a point: its metric, or why it is not acceptable."""
    if point.status == STATUS_SKIPPED:
        return f"skipped by the planner ({point.failure_kind or 'planner'})"
    if point.status == STATUS_FAILED:
        return f"failed: {point.failure_kind or 'unknown'}"
    if point.slo_met is False:
        return f"SLO missed, {_fmt_metric(point.metric)}"
    if point.preemptions > 0:
        return f"{point.preemptions:g} preemptions, {_fmt_metric(point.metric)}"
    return _fmt_metric(point.metric)


# --- growth phase -------------------------------------------------------------------------


@dataclass
class _Growth:
    """Outcome of replaying the growth points: stopped (stop_rule) or the next value."""

    stop_rule: str | None
    reason: str
    next_value: float | None = None


def _unacceptable_rule(point: Point) -> str | None:
    """The stop rule a growth point triggers by itself (failure, SLO, preemption), if any."""
    if point.unfit:
        memory = point.status == STATUS_SKIPPED or point.failure_kind in MEMORY_FAILURE_KINDS
        return "memory" if memory else "failure"
    if point.slo_met is False:
        return "slo"
    if point.preemptions > 0:
        return "preemption"
    if point.metric is None:
        return "failure"
    return None


def _gain(previous: Point, current: Point) -> float:
    """Relative change of the median metric from ``previous`` to ``current``."""
    if previous.metric > 0:
        return (current.metric - previous.metric) / previous.metric
    return math.inf if current.metric > 0 else 0.0


def _classify_step(config: SweepConfig, previous: Point, current: Point) -> str:
    """One growth step: ``gain``, ``regression``, ``flat`` or ``noisy_flat``.

    - gain: the median rose by at least plateau_threshold.
    - regression: the median fell by more than plateau_threshold and the sample ranges are
      disjoint (current max < previous min; with one sample each this is just the drop).
    - noisy_flat: neither, and the relative spread of either point exceeds the threshold.
    - flat: neither, with both spreads within the threshold.
    """
    threshold = config.plateau_threshold
    gain = _gain(previous, current)
    if gain >= threshold:
        return "gain"
    if gain < -threshold and current.spread[1] < previous.spread[0]:
        return "regression"
    noisy = max(previous.relative_spread, current.relative_spread) > threshold
    return "noisy_flat" if noisy else "flat"


def _step_evidence(config: SweepConfig, previous: Point, current: Point) -> str:
    gain = _gain(previous, current)
    gain_text = "an infinite gain" if math.isinf(gain) else f"{gain * 100:+.1f}%"
    return (
        f"{config.param}={_fmt_value(current.value)} gave {_fmt_metric(current.metric)}, "
        f"{gain_text} over {_fmt_metric(previous.metric)} at {_fmt_value(previous.value)}"
    )


def _evaluate_growth(config: SweepConfig, grow_points: Sequence[Point]) -> _Growth:
    """Replay the growth points in order and return the first stop, or the next value."""
    threshold_text = _fmt_pct(config.plateau_threshold)
    flat_steps = 0
    reason = ""
    for index, point in enumerate(grow_points):
        rule = _unacceptable_rule(point)
        if rule is not None:
            return _Growth(rule, f"growth stopped ({rule}) at {config.param}="
                                 f"{_fmt_value(point.value)}: {_describe(point)}")
        if index == 0:
            reason = f"{config.param}={_fmt_value(point.value)} gave {_fmt_metric(point.metric)}"
            continue
        previous = grow_points[index - 1]
        kind = _classify_step(config, previous, point)
        evidence = _step_evidence(config, previous, point)
        flat_steps = 0 if kind == "gain" else flat_steps + 1
        if kind == "regression":
            return _Growth("regression", f"growth stopped (regression): {evidence}, "
                                         f"a drop beyond {threshold_text} with disjoint ranges")
        if kind == "flat" or flat_steps >= 2:
            detail = "two steps in a row" if flat_steps >= 2 else "the step"
            return _Growth("plateau", f"growth stopped (plateau): {evidence}; {detail} "
                                      f"gained less than {threshold_text}")
        if kind == "noisy_flat":
            reason = (f"{evidence}: less than {threshold_text} but inside the noise (spread "
                      f"above {threshold_text}), so one more step")
        else:
            reason = f"{evidence} (threshold {threshold_text})"
    return _next_growth(config, grow_points, reason)


def _next_growth(config: SweepConfig, grow_points: Sequence[Point], reason: str) -> _Growth:
    """No stop so far: propose the next growth value, or stop at the cap."""
    if not grow_points:
        start = _round_value(config, config.start)
        return _Growth(None, f"start the growth at {config.param}={_fmt_value(start)}", start)
    last = grow_points[-1].value
    following = _grow_after(config, last)
    if following is None:
        return _Growth("max", f"growth stopped (max): {reason}; {_fmt_value(last)} is the "
                              f"largest value allowed (max {_fmt_value(config.max)})")
    return _Growth(None, f"grow to {_fmt_value(following)}: {reason}", following)


def growth_stop(config: SweepConfig, history: Sequence[Point]) -> tuple[str | None, str]:
    """Why growth stopped, from the history's growth points: (stop rule or None, sentence)."""
    grow_points = [point for point in history if point.phase == PHASE_GROW]
    outcome = _evaluate_growth(config, grow_points)
    return outcome.stop_rule, outcome.reason


# --- bisection phase ----------------------------------------------------------------------


def _latest_by_value(history: Iterable[Point]) -> dict[float, Point]:
    """Measured points keyed by value, sorted by value; a re-measured value keeps the latest."""
    points: dict[float, Point] = {}
    for point in history:
        points[point.value] = point
    return dict(sorted(points.items()))


def _best_metric(points: Iterable[Point]) -> float | None:
    metrics = [point.metric for point in points if point.acceptable]
    return max(metrics) if metrics else None


def _knee_threshold(config: SweepConfig, best: float) -> float:
    return (1 - config.plateau_threshold) * best


def _lowest_unfit(points: dict[float, Point]) -> float | None:
    """The lowest failed or skipped value: nothing at or above it is proposed."""
    unfit = [value for value, point in points.items() if point.unfit]
    return min(unfit) if unfit else None


def _midpoint(config: SweepConfig, low: float, high: float,
              points: dict[float, Point]) -> float | None:
    """The grid midpoint of (low, high), or None when the bracket is closed.

    Closed when ``high - low <= resolution``, when rounding lands on an end or a measured
    value, or when the midpoint is at or above a failed/skipped value.
    """
    if high - low <= config.resolution + 1e-12:
        return None
    middle = _round_value(config, (low + high) / 2)
    ceiling = _lowest_unfit(points)
    if not low < middle < high or middle in points:
        return None
    if ceiling is not None and middle >= ceiling:
        return None
    return middle


@dataclass
class _Bracket:
    """A bracket to bisect: its ends, the proposed midpoint (None when closed), a sentence."""

    low: float
    high: float
    midpoint: float | None
    reason: str


def _still_gaining(config: SweepConfig, top: Point, acceptable: list[Point]) -> bool:
    """True when ``top`` gained at least the threshold over the acceptable value below it."""
    below = [point for point in acceptable if point.value < top.value]
    return not below or _gain(below[-1], top) >= config.plateau_threshold


def _ceiling_bracket(config: SweepConfig, points: dict[float, Point]) -> _Bracket | None:
    """Bracket (A, C): A the top acceptable value, the best and still gaining; C the first
    unacceptable value above it. None when there is no such bracket."""
    acceptable = [point for point in points.values() if point.acceptable]
    if not acceptable:
        return None
    top = acceptable[-1]
    if top.metric < _best_metric(acceptable) or not _still_gaining(config, top, acceptable):
        return None
    above = [point for point in points.values() if point.value > top.value]
    if not above:
        return None
    ceiling = above[0]
    middle = _midpoint(config, top.value, ceiling.value, points)
    reason = (f"bisect {_fmt_value(middle)} between {_fmt_value(top.value)} (acceptable, the "
              f"best so far: {_fmt_metric(top.metric)}) and {_fmt_value(ceiling.value)} "
              f"(ceiling: {_describe(ceiling)}) to find the largest acceptable value")
    return _Bracket(top.value, ceiling.value, middle, reason)


def _knee_bracket(config: SweepConfig, points: dict[float, Point]) -> _Bracket | None:
    """Bracket (L, K): K the smallest good value, L the largest measured value below it."""
    best = _best_metric(points.values())
    if best is None:
        return None
    knee = _knee_threshold(config, best)
    good = [p for p in points.values() if p.acceptable and p.metric >= knee]
    smallest_good = good[0]
    below = [point for point in points.values() if point.value < smallest_good.value]
    if not below:
        return None
    low = below[-1]
    middle = _midpoint(config, low.value, smallest_good.value, points)
    reason = (f"bisect {_fmt_value(middle)} between {_fmt_value(low.value)} "
              f"({_describe(low)}, below the knee threshold {_fmt_metric(knee)}) and "
              f"{_fmt_value(smallest_good.value)} (good: {_fmt_metric(smallest_good.metric)}, "
              f"within {_fmt_pct(config.plateau_threshold)} of the best {_fmt_metric(best)}) "
              f"to find the smallest good value")
    return _Bracket(low.value, smallest_good.value, middle, reason)


def _next_bisection(config: SweepConfig, history: Sequence[Point], growth: _Growth) -> Decision:
    """Ceiling bracket first (it may raise the best), then the knee bracket, then finish."""
    points = _latest_by_value(history)
    closed = []
    for bracket in (_ceiling_bracket(config, points), _knee_bracket(config, points)):
        if bracket is None:
            continue
        if bracket.midpoint is not None:
            return Decision(bracket.midpoint, PHASE_BISECT, bracket.reason)
        closed.append(f"{_fmt_value(bracket.low)}..{_fmt_value(bracket.high)}")
    brackets = f"; brackets closed: {', '.join(closed)}" if closed else "; nothing to bisect"
    return Decision(None, None, f"search finished: {growth.reason}{brackets}", growth.stop_rule)


# --- public entry points ------------------------------------------------------------------


def _next_categorical(config: SweepConfig, history: Sequence[Point]) -> Decision:
    measured = {_categorical_key(point.value) for point in history}
    for index, value in enumerate(config.values):
        if _categorical_key(value) not in measured:
            return Decision(value, PHASE_CATEGORICAL, f"try {config.param}={_fmt_value(value)} "
                                                      f"({index + 1} of {len(config.values)})")
    return Decision(None, None, f"all {len(config.values)} values of {config.param} measured",
                    "exhausted")


def _categorical_key(value: Any) -> tuple[str, Any]:
    """Distinguish True from 1 and False from 0 when matching values."""
    return type(value).__name__ if isinstance(value, bool) else "other", value


def _launches_used(history: Iterable[Point]) -> int:
    return sum(point.launches for point in history)


def next_value(config: SweepConfig, history: Sequence[Point]) -> Decision:
    """The next value to measure, given every point measured so far (a pure function).

    A finished search returns ``Decision(None, None, reason, stop_rule)``. When the search
    is not finished but ``max_launches`` launches have been spent, it finishes with
    stop_rule ``budget``. See the module docstring and :func:`_classify_step` for the rules.
    """
    decision = _natural_decision(config, history)
    used = _launches_used(history)
    if decision.value is not None and config.max_launches is not None \
            and used >= config.max_launches:
        return Decision(None, None, f"budget spent: {used} of {config.max_launches} launches "
                                    f"used; next would have been: {decision.reason}", "budget")
    return decision


def _natural_decision(config: SweepConfig, history: Sequence[Point]) -> Decision:
    """The decision ignoring the launch budget."""
    if config.categorical:
        return _next_categorical(config, history)
    growth = _evaluate_growth(config, [point for point in history if point.phase == PHASE_GROW])
    if growth.stop_rule is None:
        return Decision(growth.next_value, PHASE_GROW, growth.reason)
    return _next_bisection(config, history, growth)


def choose(config: SweepConfig, history: Sequence[Point], *,
           unit: str = "req/s") -> tuple[Point | None, str]:
    """The chosen point and a sentence with the figures, or (None, why) if none is acceptable.

    Numeric knobs: the smallest acceptable value whose median metric is at least
    ``(1 - plateau_threshold) * best`` (the knee, not the raw maximum). Categorical knobs:
    the best acceptable metric, ties going to the value listed first in ``values``.
    """
    order = _fallback_order(config, history)
    if not order:
        tried = ", ".join(f"{_fmt_value(p.value)} ({_describe(p)})" for p in history)
        return None, f"no acceptable value of {config.param}; tried: {tried or 'nothing'}"
    chosen = order[0]
    acceptable = [point for point in history if point.acceptable]
    best_point = max(acceptable, key=lambda point: point.metric)
    head = f"{config.param}={_fmt_value(chosen.value)}: {_fmt_metric(chosen.metric, unit)}"
    if config.categorical or best_point.value == chosen.value:
        return chosen, f"{head}, the best acceptable value measured"
    return chosen, (f"{head}, within {_fmt_pct(config.plateau_threshold)} of the best "
                    f"{_fmt_metric(best_point.metric, unit)} at {_fmt_value(best_point.value)}")


def _fallback_order(config: SweepConfig, history: Sequence[Point]) -> list[Point]:
    """The chosen point followed by the points to try if it is rejected, in order."""
    if config.categorical:
        position = {_categorical_key(value): index for index, value in enumerate(config.values)}
        latest = {_categorical_key(point.value): point for point in history}
        acceptable = [point for point in latest.values() if point.acceptable]
        return sorted(acceptable, key=lambda point: (
            -point.metric, position.get(_categorical_key(point.value), len(position))))
    points = _latest_by_value(history)
    best = _best_metric(points.values())
    if best is None:
        return []
    knee = _knee_threshold(config, best)
    acceptable = [point for point in points.values() if point.acceptable]
    chosen = next(point for point in acceptable if point.metric >= knee)
    lower = [point for point in acceptable if point.value < chosen.value]
    return [chosen, *reversed(lower)]


def fallback_candidates(config: SweepConfig, history: Sequence[Point],
                        rejected: set) -> list[Point]:
    """Points to try, in order, once the values in ``rejected`` failed the sustained run.

    Numeric knobs: the acceptable values below the chosen one, in decreasing order, keeping
    those below every rejected value (with ``rejected`` empty: the chosen point first).
    Categorical knobs: the remaining acceptable values, best metric first.
    """
    order = _fallback_order(config, history)
    if config.categorical:
        rejected_keys = {_categorical_key(value) for value in rejected}
        return [p for p in order if _categorical_key(p.value) not in rejected_keys]
    lowest_rejected = min(rejected) if rejected else math.inf
    return [point for point in order if point.value < lowest_rejected]
