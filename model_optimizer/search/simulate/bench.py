"""The simulated test bed: noise regimes, servers with a life, and a simulated clock.

A :class:`Bench` hands out :class:`Point` s the way the sweep loop gets them from vLLM: a
*launch* costs ``launch_s`` of simulated time and may fail (above the curve's OOM ceiling),
a *window* at concurrency ``c`` costs ``window_s`` and reads the true throughput times

- a launch-to-launch offset (one draw per server, lognormal, ``offset_cv``),
- a slow drift over the server's life (a rate drawn per server in ``±drift`` per 10 min),
- per-window multiplicative noise (lognormal, ``cv``) and, with probability ``collapse``,
  a collapse to 20-50% of the truth (as the shared 2-core machine shows),

and reports a 95% half-width of ``1.96 * cv`` of its reading (what the batch-means interval
of a steady window roughly says about itself; a collapse is not announced). Nothing sleeps:
a simulated sweep takes milliseconds.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from model_optimizer.search.simulate.truth import Curve
from model_optimizer.search.sweep.strategy import Point

WARMUP_S = 5.0


@dataclass(frozen=True)
class Noise:
    """One noise regime."""

    name: str
    cv: float
    collapse: float = 0.0
    drift: float = 0.0
    offset_cv: float = 0.0
    window_s: float = 15.0

    def launch_s(self, gpu: bool) -> float:
        """Simulated seconds one server launch costs (30 s CPU, 3 min GPU)."""
        return 180.0 if gpu else 30.0


REGIMES = {
    "cv0": Noise("cv0", 0.0),
    "cv2": Noise("cv2", 0.02, offset_cv=0.01),
    "cv5": Noise("cv5", 0.05, offset_cv=0.02, drift=0.02),
    "cv10": Noise("cv10", 0.10, offset_cv=0.05, drift=0.05),
    "cv30+collapse": Noise("cv30+collapse", 0.30, collapse=0.08, drift=0.15, offset_cv=0.10),
    "cv60+collapse": Noise("cv60+collapse", 0.60, collapse=0.15, drift=0.25, offset_cv=0.15),
}


class Server:
    """One simulated server: its launch time, offset and drift rate."""

    def __init__(self, bench: Bench, ceiling) -> None:
        noise, rng = bench.noise, bench.rng
        self.bench, self.ceiling, self.born = bench, ceiling, bench.clock
        self.offset = lognormal(rng, noise.offset_cv)
        self.drift = rng.uniform(-noise.drift, noise.drift)
        self.started = bench.curve.starts(ceiling)

    def window(self, value, phase: str, *, launches: int = 0) -> Point:
        """A steady-state window at ``value`` in flight (``value`` itself when categorical)."""
        bench = self.bench
        if not self.started:
            return Point(value, phase, "failed", [], failure_kind="oom", launches=launches)
        if not bench.curve.categorical and value > self.ceiling:
            return Point(value, phase, "skipped", [], failure_kind="planner")
        reading, ttft = self.read(bench.curve.throughput(value), bench.curve.ttft_ratio(value))
        return Point(value, phase, "ok", [reading], slo_met=ttft <= 1.0, launches=launches,
                     half_width=1.96 * bench.noise.cv * reading or None,
                     slo_ratios=[ttft] if bench.curve.slo_edge is not None else [])

    def read(self, throughput: float, ttft_ratio: float) -> tuple[float, float]:
        """One window (warm-up and steady part on the clock): the throughput and the TTFT
        p99 / SLO it reads when the truth is ``throughput`` and ``ttft_ratio``."""
        bench = self.bench
        bench.clock += WARMUP_S + bench.noise.window_s
        bench.windows += 1
        return throughput * self.factor(), ttft_ratio * lognormal(bench.rng, bench.noise.cv)

    def factor(self, cv_scale: float = 1.0) -> float:
        """The multiplicative error of one window read now (``cv_scale``: a longer run's
        share of a window's noise)."""
        noise, rng = self.bench.noise, self.bench.rng
        age_min = (self.bench.clock - self.born) / 60.0
        drift = max(0.05, 1.0 + self.drift * age_min / 10.0)
        window = lognormal(rng, noise.cv * cv_scale)
        if noise.collapse and rng.random() < noise.collapse:
            window *= rng.uniform(0.2, 0.5)
        return self.offset * drift * window


class Bench:
    """The simulated machine one search runs on: curve, noise, seeded randomness, clock."""

    def __init__(self, curve: Curve, noise: Noise, seed: int) -> None:
        self.curve, self.noise, self.rng = curve, noise, random.Random(seed)
        self.clock = 0.0
        self.launches = self.windows = 0

    def launch(self, ceiling) -> Server:
        """Start a server with max_num_seqs (or the categorical value) ``ceiling``."""
        self.clock += self.noise.launch_s(self.curve.gpu)
        self.launches += 1
        return Server(self, ceiling)

    def relaunch_point(self, value, phase: str) -> Point:
        """The relaunch strategy's measurement: a server of its own, one window."""
        return self.launch(value).window(value, phase, launches=1)

    def confirm(self, value, seconds: float) -> Confirmed:
        """The sustained confirmation run: its own launch; passes when the value starts
        and the SLO holds in that run; reads the throughput as a window of ``seconds`` would
        (the window noise shrunk by the square root of the longer run, the server's own
        offset, drift and collapses as they are), with its 95% half-width."""
        server = self.launch(value)
        if not server.started:
            return Confirmed(False, {})
        self.clock += seconds
        passed = self.curve.ttft_ratio(value) * lognormal(self.rng, self.noise.cv) <= 1.0
        scale = math.sqrt(self.noise.window_s / seconds)
        reading = self.curve.throughput(value) * server.factor(scale)
        return Confirmed(passed, {"qps": reading,
                                  "qps_half_width": 1.96 * self.noise.cv * scale * reading})


@dataclass(frozen=True)
class Confirmed:
    """A simulated sustained run: whether it passed, and its figures (``qps`` and its
    half-width, as ``measure.step_figures`` names them)."""

    passed: bool
    figures: dict


def lognormal(rng: random.Random, cv: float) -> float:
    """A mean-one lognormal factor with coefficient of variation ``cv`` (1 when cv is 0)."""
    if cv <= 0:
        return 1.0
    sigma = math.sqrt(math.log(1 + cv * cv))
    return math.exp(rng.gauss(-sigma * sigma / 2, sigma))


@dataclass(frozen=True)
class Outcome:
    """What one simulated search ended with."""

    chosen: object | None
    validated: bool
    warned: bool          # the report said "not resolved"
    launches: int
    windows: int
    wall_s: float
