"""The measured values of a sweep, pooled: one point per value with every window it got, its
interval, and the noise of the values measured more than once."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from model_optimizer.search.core.scanrules import pooled_cv

PHASE_REMEASURE = "remeasure"


def interval(point: Any) -> tuple[float, float] | None:
    """(low, high) of a point's metric: its half-width, widened by the spread of its samples."""
    samples = point.metric_samples
    if not samples:
        return None
    middle = statistics.median(samples)
    half = point.half_width or 0.0
    return min(middle - half, min(samples)), max(middle + half, max(samples))


def half_width(point: Any) -> float:
    """Half the width of :func:`interval` (0 without samples)."""
    bounds = interval(point)
    return 0.0 if bounds is None else (bounds[1] - bounds[0]) / 2


def pooled(points: Iterable[Any]) -> list[Any]:
    """One point per value, every measurement pooled: samples joined (in order), the widest
    half-width, run ids and launches summed, status and flags from the latest measurement."""
    merged: dict[Any, Any] = {}
    for point in points:
        key = key_of(point.value)
        if key not in merged:
            merged[key] = copy_point(point)
            continue
        into = merged[key]
        into.metric_samples = into.metric_samples + list(point.metric_samples)
        into.half_width = max(into.half_width or 0.0, point.half_width or 0.0) or None
        into.run_ids = into.run_ids + list(point.run_ids)
        into.slo_ratios = into.slo_ratios + list(point.slo_ratios)
        into.launches += point.launches
        into.status, into.failure_kind = point.status, point.failure_kind
        into.slo_met = None if into.slo_met is None and point.slo_met is None else (
            into.slo_met is not False and point.slo_met is not False)
        into.preemptions = max(into.preemptions, point.preemptions)
    return list(merged.values())


def key_of(value: Any) -> tuple[str, Any]:
    """A value as a dictionary key: True and 1 are different values of a knob."""
    return (type(value).__name__ if isinstance(value, bool) else "other", value)


def copy_point(point: Any) -> Any:
    """A fresh point with the same fields."""
    return type(point).from_dict(point.to_dict())


def measured_noise(history: Sequence[Any]) -> dict[str, Any] | None:
    """Pooled coefficient of variation of the values measured more than once, with the
    number of values and windows behind it; None when no value was measured twice
    (:func:`~model_optimizer.search.core.scanrules.pooled_cv` over the pooled values)."""
    return pooled_cv(p.metric_samples for p in pooled(history) if p.metric)
