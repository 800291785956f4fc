"""The figures of one measured window as a type: what ``metrics.json`` holds.

``load.stats``/``load.steady``/``load.classes`` compute the figures as a dict (the
``metrics.json`` format, unchanged); ``Figures.from_dict`` reads such a dict into typed,
frozen fields, and ``to_dict`` writes the same dict back, key for key and in the same order
(keys it does not declare are kept in ``extra``), so an archived file reads and writes
back identical. Searches decide on ``Figures`` (``figure``, ``interval``); the figure keys
they compare are ``FIGURE_KEYS``, the one list (``search.measure`` re-exports it).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

#: the run figures a search compares configurations by (and a validated block records): the
#: one list the sweep's and the tune's summaries and the written revisions share
FIGURE_KEYS = ("qps", "goodput_qps", "output_tok_s", "ttft_p50_ms", "ttft_p99_ms",
               "tpot_p50_ms", "tpot_p99_ms", "e2e_p99_ms", "success_rate")


def _declared(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls) if f.name not in ("extra", "keys"))


@dataclass(frozen=True)
class _Record:
    """Typed fields, the keys they do not cover (``extra``) and the order of the source."""

    extra: Mapping[str, Any] = field(default_factory=dict)
    keys: tuple[str, ...] = ()

    @classmethod
    def _parse(cls, key: str, value: Any) -> Any:
        return copy.deepcopy(value)

    @staticmethod
    def _write(value: Any) -> Any:
        if isinstance(value, _Record):
            return value.to_dict()
        if isinstance(value, Mapping):
            return {k: _Record._write(v) for k, v in value.items()}
        return copy.deepcopy(value)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        """The typed view of ``data`` (a ``metrics.json`` mapping, or one of its parts)."""
        declared = set(_declared(cls))
        typed = {k: cls._parse(k, v) for k, v in data.items() if k in declared}
        extra = {k: copy.deepcopy(v) for k, v in data.items() if k not in declared}
        return cls(**typed, extra=extra, keys=tuple(data))

    def to_dict(self) -> dict[str, Any]:
        """The mapping again: the keys read (in their order), else every declared field."""
        keys = self.keys or (*_declared(type(self)), *self.extra)
        return {k: self._write(self.extra[k] if k in self.extra else getattr(self, k))
                for k in keys}


@dataclass(frozen=True)
class Interval(_Record):
    """A figure with its 95% interval: ``value ± half_width`` = [low, high]."""

    value: float | None = None
    half_width: float | None = None
    low: float | None = None
    high: float | None = None
    method: str | None = None

    def __str__(self) -> str:
        if self.value is None:
            return "n/a"
        if self.half_width is None:
            return f"{self.value:.4g}"
        return f"{self.value:.4g} ± {self.half_width:.2g}"


@dataclass(frozen=True)
class Figures(_Record):
    """One window's figures (a run's, or one request class's under ``classes``).

    Latencies are in ms, rates per second; None where there was nothing to measure.
    """

    requests: int | None = None
    completed: int | None = None
    failed: int | None = None
    success_rate: float | None = None
    error_rate: float | None = None
    window_s: float | None = None
    qps: float | None = None
    output_tok_s: float | None = None
    total_tok_s: float | None = None
    total_prompt_tokens: int | None = None
    total_output_tokens: int | None = None
    ttft_mean_ms: float | None = None
    ttft_p50_ms: float | None = None
    ttft_p90_ms: float | None = None
    ttft_p99_ms: float | None = None
    tpot_mean_ms: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p90_ms: float | None = None
    tpot_p99_ms: float | None = None
    itl_mean_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p90_ms: float | None = None
    itl_p99_ms: float | None = None
    e2e_mean_ms: float | None = None
    e2e_p50_ms: float | None = None
    e2e_p90_ms: float | None = None
    e2e_p99_ms: float | None = None
    good_requests: int | None = None
    goodput_qps: float | None = None
    slo_met: bool | None = None
    slo_violations: list[str] | None = None
    slo_ratio: float | None = None   # the worst latency figure over its SLO bound
    mean_prompt_tokens: float | None = None
    mean_output_tokens: float | None = None
    capped_requests: int | None = None
    mismatched_output_tokens: int | None = None
    steady: Mapping[str, Any] | None = None          # the steady window: start, end, rule
    intervals: Mapping[str, Interval] | None = None  # figure key -> its interval
    whole_window: Mapping[str, Any] | None = None    # rates over the whole window
    classes: Mapping[str, Figures] | None = None     # class name -> its figures
    ignore_eos: bool | None = None
    stopped_reason: str | None = None
    ready_after_s: float | None = None
    telemetry_peaks: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, metrics: Figures | Mapping[str, Any] | None) -> Figures:
        """``metrics`` itself, or the view of a metrics mapping (None: nothing measured)."""
        if isinstance(metrics, Figures):
            return metrics
        return cls.from_dict(metrics or {})

    @classmethod
    def _parse(cls, key: str, value: Any) -> Any:
        if key == "intervals" and value is not None:
            return {k: Interval.from_dict(v) for k, v in value.items()}
        if key == "classes" and value is not None:
            return {k: Figures.from_dict(v) for k, v in value.items()}
        return copy.deepcopy(value)

    def figure(self, key: str) -> Any:
        """A figure by key; ``short:goodput_qps`` reads class ``short``'s figure."""
        if ":" in key:
            name, key = key.split(":", 1)
            part = (self.classes or {}).get(name)
            return part.figure(key) if part is not None else None
        if key in self.extra:
            return self.extra[key]
        return getattr(self, key, None) if key in _declared(Figures) else None

    def interval(self, key: str) -> Interval | None:
        """The 95% interval of a figure (steady-state windows), None without one."""
        return (self.intervals or {}).get(key)

    def half_width(self, key: str) -> float | None:
        """The 95% half-width of a figure's interval, None without one."""
        found = self.interval(key)
        return found.half_width if found is not None else None

    def compared(self) -> dict[str, Any]:
        """The figures a search compares (``FIGURE_KEYS``), None where not measured."""
        return {key: self.figure(key) for key in FIGURE_KEYS}
