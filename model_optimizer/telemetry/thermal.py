"""Is the card warm and steady? The rule on NVML thermals samples, defined once.

A GPU's speed follows its SM clock, and the clock follows temperature and power: a card
that starts cold boosts, heats, and settles lower (a lent H200 under a bf16 matrix load,
``benchmarks/gpu_records/gpu-thermal.json``: 1980 MHz idle at 41 C, 1335-1485 MHz in the
first two seconds of load, then 1410-1455 MHz at 62-63 C for a minute). The field report
behind issue 39 measured one card 20% apart two days apart, cold one day and warm the
other. So a window is measured only once the card is **steady**, judged per device over
the last :data:`SPAN_S` seconds of samples (:func:`card_steady`):

- the **temperature** moved less than :data:`TEMP_STEADY_C` (max - min; NVML reports whole
  degrees, so a reading flickering between 62 and 63 C is steady, a climb of 2 C is not);
- the **SM clock** has no trend: the mean of the span's later half is within
  :data:`CLOCK_TOLERANCE` (2%) of its earlier half's; and no reading lies more than
  :data:`CLOCK_SPREAD` (5%) from the span's median (a throttling step, or the boost of a
  card that just started working). A max-min rule at 2% would never pass the recorded
  H200: under a power-capped load its clock flickers by 3% from one 0.5 s sample to the
  next while its mean over seconds moves by 0.3%.

The numbers are mopt's choice, fitted to that recording. NVIDIA's advice for repeatable
measurements is to lock the clocks (``nvidia-smi --lock-gpu-clocks``, as root; NVIDIA
developer blog, "Advanced API Performance: SetStablePowerState"), which mopt leaves to the
operator; it gives no criterion for when an unlocked card is steady. The span is 10 s, as
long as the throughput warm-up's three 3-second rounds (``load/warmup.py``), so a card
already warm adds about a second to the warm-up. Its limit: a clock drifting slower than
2% per 5 s (0.4%/s) passes; the window's record and ``mopt verify``'s comparison of clocks
show what such a drift did.

Two SM clocks are **the same clock** when their means lie within :data:`CLOCK_TOLERANCE`
of each other: :func:`compare_clocks` says so for ``mopt verify`` (``history/verify_rule``).
Each measured window records its devices' temperature and SM clock (:func:`window_thermals`,
``metrics.json`` ``thermals``).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

SPAN_S = 10.0
TEMP_STEADY_C = 2.0
CLOCK_TOLERANCE = 0.02
CLOCK_SPREAD = 0.05
MIN_SAMPLES = 4
RULE = (f"over the last {SPAN_S:g} s per GPU: temperature moved less than "
        f"{TEMP_STEADY_C:g} C; the SM clock's halves within {CLOCK_TOLERANCE:.0%} of each "
        f"other and every reading within {CLOCK_SPREAD:.0%} of their median")


@dataclass(frozen=True)
class ThermalSample:
    """One device's reading at one time (wall-clock epoch seconds)."""

    t: float
    index: int
    temperature_c: float | None = None
    sm_clock_mhz: float | None = None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _sample(t: Any, row: Mapping[str, Any]) -> ThermalSample | None:
    index, when = row.get("index"), _number(t)
    if when is None or isinstance(index, bool) or not isinstance(index, int):
        return None
    return ThermalSample(when, index, _number(row.get("temperature_c")),
                         _number(row.get("sm_clock_mhz")))


def samples_of(series: Iterable[Mapping[str, Any]]) -> list[ThermalSample]:
    """The readings of a series: telemetry samples (``t`` and ``gpu_thermals``, one row per
    device as ``NvmlProbe.thermals`` gives them) or flat rows (``t``, ``index``,
    ``temperature_c``, ``sm_clock_mhz``: ``benchmarks/gpu_records``). Rows that are not
    readings are skipped."""
    found = []
    for entry in series:
        rows = entry.get("gpu_thermals") if "gpu_thermals" in entry else [entry]
        for row in rows if isinstance(rows, list) else []:
            sample = _sample(entry.get("t"), row) if isinstance(row, Mapping) else None
            if sample is not None:
                found.append(sample)
    return found


def _by_device(samples: Iterable[ThermalSample]) -> dict[int, list[ThermalSample]]:
    devices: dict[int, list[ThermalSample]] = {}
    for sample in sorted(samples, key=lambda s: s.t):
        devices.setdefault(sample.index, []).append(sample)
    return dict(sorted(devices.items()))


# ----- the rule --------------------------------------------------------------------------------
@dataclass(frozen=True)
class CardVerdict:
    """Whether every card is steady, and why in words. ``known`` is False when the samples
    carry neither a temperature nor an SM clock (nothing to judge)."""

    steady: bool
    reason: str
    known: bool = True


def _temperature_reason(index: int, temps: list[float], span_s: float) -> str | None:
    if not temps or max(temps) - min(temps) < TEMP_STEADY_C:
        return None
    word = "warming" if temps[-1] >= temps[0] else "cooling"
    return (f"GPU {index} {word}: {temps[0]:g} -> {temps[-1]:g} C over the last {span_s:g} s "
            f"({min(temps):g}-{max(temps):g} C; steady under {TEMP_STEADY_C:g} C)")


def _clock_reason(index: int, clocks: list[float], span_s: float) -> str | None:
    if not clocks:
        return None
    median = statistics.median(clocks)
    far = max(clocks, key=lambda clock: abs(clock - median))
    if median > 0 and abs(far - median) > CLOCK_SPREAD * median:
        return (f"GPU {index} SM clock unsettled: {far:g} MHz, {abs(far - median) / median:.0%} "
                f"from the median {median:g} MHz of the last {span_s:g} s (steady within "
                f"{CLOCK_SPREAD:.0%})")
    half = len(clocks) // 2
    before, after = statistics.fmean(clocks[:half]), statistics.fmean(clocks[-half:])
    if median > 0 and abs(after - before) > CLOCK_TOLERANCE * median:
        return (f"GPU {index} SM clock moving: {before:.0f} -> {after:.0f} MHz between the "
                f"halves of the last {span_s:g} s (steady under {CLOCK_TOLERANCE:.0%})")
    return None


def _device_reason(index: int, samples: list[ThermalSample], now: float,
                   span_s: float) -> str | None:
    """None when the device is steady; else why not."""
    covered = now - samples[0].t
    if covered < span_s:
        return f"GPU {index}: {covered:.0f} s of samples, the check needs {span_s:g} s"
    recent = [sample for sample in samples if sample.t >= now - span_s]
    if len(recent) < MIN_SAMPLES:
        return (f"GPU {index}: {len(recent)} samples in the last {span_s:g} s, the check "
                f"needs {MIN_SAMPLES}")
    temps = [s.temperature_c for s in recent if s.temperature_c is not None]
    clocks = [s.sm_clock_mhz for s in recent if s.sm_clock_mhz is not None]
    return _temperature_reason(index, temps, span_s) or _clock_reason(index, clocks, span_s)


def _span_text(index: int, samples: list[ThermalSample], now: float, span_s: float) -> str:
    recent = [sample for sample in samples if sample.t >= now - span_s]
    temps = [s.temperature_c for s in recent if s.temperature_c is not None]
    clocks = [s.sm_clock_mhz for s in recent if s.sm_clock_mhz is not None]
    parts = [f"{min(temps):g}-{max(temps):g} C"] if temps else []
    parts += [f"SM {min(clocks):g}-{max(clocks):g} MHz"] if clocks else []
    return f"GPU {index} " + ", ".join(parts)


def card_steady(samples: Iterable[ThermalSample], now: float,
                span_s: float = SPAN_S) -> CardVerdict:
    """The rule (module docstring) at ``now`` over ``samples``: every device that reports a
    temperature or an SM clock must be steady over the last ``span_s`` seconds, and its
    samples must cover that span."""
    devices = {index: [s for s in found if s.temperature_c is not None
                       or s.sm_clock_mhz is not None]
               for index, found in _by_device(s for s in samples if s.t <= now).items()}
    devices = {index: found for index, found in devices.items() if found}
    if not devices:
        return CardVerdict(False, "no temperature or SM clock in the samples", known=False)
    reasons = [reason for index, found in devices.items()
               if (reason := _device_reason(index, found, now, span_s)) is not None]
    if reasons:
        return CardVerdict(False, "; ".join(reasons))
    spans = "; ".join(_span_text(index, found, now, span_s) for index, found in devices.items())
    return CardVerdict(True, f"steady: {spans} over the last {span_s:g} s")


# ----- what a window records -------------------------------------------------------------------
@dataclass(frozen=True)
class Spread:
    """Lowest, highest and mean of one reading over a window."""

    low: float
    high: float
    mean: float

    @classmethod
    def of(cls, values: list[float]) -> Spread | None:
        """The spread of ``values``; None when there are none."""
        if not values:
            return None
        return cls(min(values), max(values), round(statistics.fmean(values), 1))

    def to_dict(self) -> dict[str, float]:
        """JSON form."""
        return {"min": self.low, "max": self.high, "mean": self.mean}


@dataclass(frozen=True)
class DeviceThermals:
    """One device over one measured window (``metrics.json`` ``thermals``, one per GPU)."""

    index: int
    samples: int
    temperature_c: Spread | None
    sm_clock_mhz: Spread | None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"index": self.index, "samples": self.samples,
                "temperature_c": self.temperature_c.to_dict() if self.temperature_c else None,
                "sm_clock_mhz": self.sm_clock_mhz.to_dict() if self.sm_clock_mhz else None}


def window_thermals(samples: Iterable[ThermalSample], start: float | None,
                    end: float | None) -> list[DeviceThermals]:
    """Per device, the temperature and SM clock read between ``start`` and ``end`` (wall
    seconds; None: unbounded on that side); empty when NVML read nothing then."""
    inside = [s for s in samples if (start is None or s.t >= start)
              and (end is None or s.t <= end)]
    rows = []
    for index, found in _by_device(inside).items():
        temps = [s.temperature_c for s in found if s.temperature_c is not None]
        clocks = [s.sm_clock_mhz for s in found if s.sm_clock_mhz is not None]
        if temps or clocks:
            rows.append(DeviceThermals(index, len(found), Spread.of(temps), Spread.of(clocks)))
    return rows


def describe_window(record: Any) -> str | None:
    """``GPU 0 62-63 C, SM 1410-1455 MHz (mean 1432)`` from a window's ``thermals``
    record; None without one."""
    def spread(found: Any) -> tuple[float, float, float] | None:
        if not isinstance(found, Mapping):
            return None
        values = tuple(_number(found.get(key)) for key in ("min", "max", "mean"))
        return None if None in values else values  # type: ignore[return-value]

    parts = []
    for row in record if isinstance(record, list) else []:
        if not isinstance(row, Mapping):
            continue
        temp, clock = spread(row.get("temperature_c")), spread(row.get("sm_clock_mhz"))
        words = [f"{temp[0]:g}-{temp[1]:g} C"] if temp else []
        words += [f"SM {clock[0]:g}-{clock[1]:g} MHz (mean {clock[2]:g})"] if clock else []
        if words:
            parts.append(f"GPU {row.get('index')} " + ", ".join(words))
    return "; ".join(parts) or None


# ----- two windows' clocks ---------------------------------------------------------------------
@dataclass(frozen=True)
class ClockComparison:
    """The SM clocks two windows were measured at (mean per device), and whether they are the
    same clock; ``text`` says it in words."""

    same: bool
    text: str
    validated_mhz: dict[int, float]
    measured_mhz: dict[int, float]

    def to_dict(self) -> dict[str, Any]:
        """JSON form (device indices as strings, as JSON keys are)."""
        return {"same": self.same, "text": self.text,
                "validated_sm_clock_mhz": {str(k): v for k, v in self.validated_mhz.items()},
                "measured_sm_clock_mhz": {str(k): v for k, v in self.measured_mhz.items()},
                "tolerance": CLOCK_TOLERANCE}


def sm_clocks(record: Any) -> dict[int, float]:
    """Mean SM clock per device of a window's ``thermals`` record (malformed rows skipped)."""
    clocks = {}
    for row in record if isinstance(record, list) else []:
        if not isinstance(row, Mapping) or not isinstance(row.get("sm_clock_mhz"), Mapping):
            continue
        index, mean = row.get("index"), _number(row["sm_clock_mhz"].get("mean"))
        if isinstance(index, int) and not isinstance(index, bool) and mean is not None:
            clocks[index] = mean
    return clocks


def _mhz(clocks: dict[int, float]) -> str:
    return "/".join(f"{clock:.0f}" for clock in clocks.values())


def compare_clocks(validated: Any, measured: Any) -> ClockComparison | None:
    """The SM clocks of two windows' ``thermals`` records; None when neither recorded one
    (no GPU on either side: nothing to say)."""
    old, new = sm_clocks(validated), sm_clocks(measured)
    if not old and not new:
        return None
    if not old:
        return ClockComparison(False, "clocks not compared: the validating run recorded no SM "
                               f"clock (now SM {_mhz(new)} MHz)", old, new)
    if not new:
        return ClockComparison(False, "clocks not compared: this measurement recorded no SM "
                               f"clock (validated at SM {_mhz(old)} MHz; NVML did not answer "
                               "where mopt ran)", old, new)
    differ = [index for index in sorted(old.keys() | new.keys())
              if index not in old or index not in new
              or abs(new[index] - old[index]) > CLOCK_TOLERANCE * max(old[index], new[index])]
    shown = differ or sorted(old.keys() & new.keys())
    several = len(old.keys() | new.keys()) > 1
    pairs = ", ".join(_pair(old.get(i), new.get(i), f"GPU {i} " if several else "")
                      for i in shown)
    word = "different" if differ else "the same"
    return ClockComparison(not differ, f"taken at {word} clocks: SM {pairs}", old, new)


def _pair(validated: float | None, measured: float | None, label: str) -> str:
    """``1980 vs 1755 MHz``, with a missing side as ``no reading``."""
    def side(clock: float | None) -> str:
        return "no reading" if clock is None else f"{clock:.0f}"
    return f"{label}{side(validated)} vs {side(measured)} MHz"
