"""Synthetic workload mixes: request classes with weights and length distributions.

``workload.mix`` maps a class name to ``{weight, prompt_tokens, output_tokens}``. A length
is a whole number (fixed) or a distribution, always clipped to its bounds ``[min, max]``:

- ``{dist: uniform, min: 16, max: 64}``: every whole number in the range equally likely;
- ``{dist: normal, mean: 512, stddev: 64, min: 1, max: 1024}``;
- ``{dist: lognormal, median: 800, sigma: 0.6, min: 64, max: 2000}``: ``sigma`` is the
  standard deviation of the natural log of the length (long tails, as real prompts have).

``min`` defaults to 1; ``normal`` and ``lognormal`` need ``max`` so a draw stays bounded.
Request ``i``'s class and lengths depend only on (seed, i): a run is reproducible and the
mix can be drawn lazily, one request at a time.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DISTRIBUTIONS = ("uniform", "normal", "lognormal")
_PARAMS = {"uniform": ("min", "max"), "normal": ("mean", "stddev", "min", "max"),
           "lognormal": ("median", "sigma", "min", "max")}
_REQUIRED = {"uniform": ("max",), "normal": ("mean", "stddev", "max"),
             "lognormal": ("median", "sigma", "max")}


class MixError(ValueError):
    """A malformed ``workload.mix``; ``path`` locates it in the recipe."""

    def __init__(self, path: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        self.path = path


@dataclass(frozen=True)
class Length:
    """A token length: fixed (``dist`` None, ``low == high``) or a bounded distribution."""

    dist: str | None
    low: int
    high: int
    center: float = 0.0  # normal: mean; lognormal: median
    spread: float = 0.0  # normal: stddev; lognormal: sigma of ln(length)

    def draw(self, rng: random.Random) -> int:
        """One length, clipped to ``[low, high]``."""
        if self.dist is None:
            return self.low
        if self.dist == "uniform":
            return rng.randint(self.low, self.high)
        if self.dist == "normal":
            value = rng.gauss(self.center, self.spread)
        else:
            value = math.exp(rng.gauss(math.log(self.center), self.spread))
        return min(self.high, max(self.low, round(value)))

    def describe(self) -> str:
        """``64``, ``uniform 16..64``, ``lognormal median 800 sigma 0.6 in 64..2000``."""
        if self.dist is None:
            return str(self.low)
        if self.dist == "uniform":
            return f"uniform {self.low}..{self.high}"
        names = ("mean", "stddev") if self.dist == "normal" else ("median", "sigma")
        return (f"{self.dist} {names[0]} {self.center:g} {names[1]} {self.spread:g} "
                f"in {self.low}..{self.high}")


@dataclass(frozen=True)
class RequestClass:
    """One class of a mix."""

    name: str
    weight: float
    prompt_tokens: Length
    output_tokens: Length


def parse_length(value: Any, where: str) -> Length:
    """A ``Length`` from a recipe value; ValueError naming ``where`` when it is malformed."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise ValueError(f"{where} must be at least 1, got {value}")
        return Length(None, value, value)
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must be a whole number or {{dist: ..., ...}}, got {value!r}")
    dist = value.get("dist")
    if dist not in DISTRIBUTIONS:
        raise ValueError(f"{where}.dist must be one of {', '.join(DISTRIBUTIONS)}, got {dist!r}")
    unknown = set(value) - {"dist", *_PARAMS[dist]}
    if unknown:
        raise ValueError(f"{where}: {dist} takes {', '.join(_PARAMS[dist])}, not "
                         f"{', '.join(sorted(unknown))}")
    missing = [key for key in _REQUIRED[dist] if value.get(key) is None]
    if missing:
        raise ValueError(f"{where}: {dist} needs {', '.join(missing)}")
    low, high = int(value.get("min", 1)), int(value["max"])
    if not 1 <= low <= high:
        raise ValueError(f"{where}: needs 1 <= min <= max, got min {low}, max {high}")
    if dist == "uniform":
        return Length(dist, low, high)
    center = float(value["mean" if dist == "normal" else "median"])
    spread = float(value["stddev" if dist == "normal" else "sigma"])
    if spread < 0 or (dist == "lognormal" and center <= 0):
        raise ValueError(f"{where}: the spread must be >= 0 and a lognormal median > 0")
    return Length(dist, low, high, center, spread)


def parse_mix(mix: Mapping[str, Any], where: str = "workload.mix") -> list[RequestClass]:
    """The classes of a ``workload.mix`` mapping, in the order written."""
    if not mix:
        raise MixError(("workload", "mix"), f"{where} needs at least one class")
    classes = []
    for name, spec in mix.items():
        here, path = f"{where}.{name}", ("workload", "mix", str(name))
        if not isinstance(spec, Mapping):
            raise MixError(path, f"{here} must be a mapping with weight, prompt_tokens, "
                           "output_tokens")
        weight = spec.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or weight <= 0:
            raise MixError(path + ("weight",),
                           f"{here}.weight must be a positive number, got {weight!r}")
        lengths = []
        for key in ("prompt_tokens", "output_tokens"):
            if key not in spec:
                raise MixError(path, f"{here} needs {key}")
            try:
                lengths.append(parse_length(spec[key], f"{here}.{key}"))
            except ValueError as exc:
                raise MixError(path + (key,), str(exc)) from None
        classes.append(RequestClass(str(name), float(weight), *lengths))
    return classes


@dataclass(frozen=True)
class Draw:
    """What request ``index`` of a mix asks for."""

    request_class: str
    prompt_tokens: int
    output_tokens: int


class MixSampler:
    """Class and lengths of request ``i``, a pure function of (seed, i)."""

    def __init__(self, classes: list[RequestClass], seed: int = 0) -> None:
        self.classes = classes
        self.seed = seed
        total = sum(c.weight for c in classes)
        self._cumulative = []
        running = 0.0
        for request_class in classes:
            running += request_class.weight / total
            self._cumulative.append(running)

    def draw(self, index: int) -> Draw:
        """The class and lengths of request ``index``."""
        rng = random.Random(f"mopt-mix:{self.seed}:{index}")
        pick = rng.random()
        chosen = next((c for c, edge in zip(self.classes, self._cumulative, strict=True)
                       if pick < edge), self.classes[-1])
        return Draw(chosen.name, chosen.prompt_tokens.draw(rng),
                    chosen.output_tokens.draw(rng))

    def longest(self) -> tuple[int, int]:
        """The largest (prompt, output) tokens any request can ask for."""
        return (max(c.prompt_tokens.high for c in self.classes),
                max(c.output_tokens.high for c in self.classes))
