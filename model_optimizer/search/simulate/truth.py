"""Ground-truth curves with known answers for the search simulator.

Each :class:`Curve` says what a perfectly quiet measurement of one knob value reads: its
throughput (req/s), whether a server launched with that value starts (an OOM ceiling fails
at launch, as vLLM does), and its TTFT p99 as a fraction of the SLO (above 1: the SLO is
missed). From these follow the true best acceptable value and the true knee (the smallest
value within the plateau threshold of the true best) that a search is judged against.

Throughput comes from a step-time model of continuous batching (:class:`StepTime`: a fixed
part per engine step, a part per sequence in the batch and a part per prefill token, and a
KV budget capping the batch), calibrated twice:

- **CPU**: on the grid of separate vLLM CPU launches that mopt recorded (benchmarks/README.md,
  issue 11 run 4: 8.41, 13.87, 20.46, 38.97, 48.01, 69.78, 88.77 req/s at 1..64, 32 output
  tokens) by least squares on ``1/X = out * (fixed/n + per_seq)`` in relative terms;
- **GPU**: on the published field figure for a 7B GPTQ INT4 model on an A10 (TPOT about
  30 ms at 4 in flight, about 210 output tok/s at 16), solved exactly for fixed and per_seq.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy

#: issue 11 run 4 grid (benchmarks/README.md): max_num_seqs -> req/s, 32 output tokens
CPU_GRID = {1: 8.41, 2: 13.87, 4: 20.46, 8: 38.97, 16: 48.01, 32: 69.78, 64: 88.77}
CPU_OUTPUT_TOKENS = 32
#: the field report: TPOT at 4 in flight (ms), output tok/s at 16 in flight
GPU_TPOT_AT_4_MS, GPU_TOK_S_AT_16 = 30.0, 210.0
GPU_OUTPUT_TOKENS = 128
#: the part of a TTFT outside the engine's steps (HTTP, tokenizing): a constant here
TTFT_OVERHEAD_MS = 5.0


@dataclass(frozen=True)
class StepTime:
    """Continuous batching: one engine step serves every running sequence one token."""

    fixed_ms: float
    per_seq_ms: float
    output_tokens: int
    per_prefill_token_ms: float = 0.0
    prompt_tokens: int = 64
    batch_cap: int | None = None   # the KV budget in sequences; more wait in the queue

    def batch(self, in_flight: float) -> float:
        """Sequences in the running batch at ``in_flight`` requests."""
        return in_flight if self.batch_cap is None else min(in_flight, self.batch_cap)

    def step_ms(self, in_flight: float) -> float:
        """One step: fixed + per sequence + the prefill of the requests replacing finished
        ones (batch * prompt / output tokens per step on average)."""
        batch = self.batch(in_flight)
        prefill = batch * self.prompt_tokens / self.output_tokens
        return self.fixed_ms + self.per_seq_ms * batch + self.per_prefill_token_ms * prefill

    def throughput(self, in_flight: float) -> float:
        """Requests per second with ``in_flight`` requests kept in flight."""
        return self.batch(in_flight) * 1000.0 / (self.step_ms(in_flight) * self.output_tokens)


def cpu_step_time(batch_cap: int | None = None) -> StepTime:
    """The step-time model fitted to :data:`CPU_GRID` (least squares on 1/X)."""
    n = numpy.array(sorted(CPU_GRID), dtype=float)
    inverse = numpy.array([1.0 / CPU_GRID[int(k)] for k in n]) * 1000.0 / CPU_OUTPUT_TOKENS
    relative = 1.0 / inverse   # weigh each point by its own size: relative errors
    design = numpy.column_stack([1.0 / n, numpy.ones_like(n)]) * relative[:, None]
    (fixed, per_seq), *_ = numpy.linalg.lstsq(design, inverse * relative, rcond=None)
    return StepTime(float(fixed), float(per_seq), CPU_OUTPUT_TOKENS, batch_cap=batch_cap)


def gpu_step_time() -> StepTime:
    """The step-time model through the two published A10 figures."""
    step_at_16 = 16 * 1000.0 / GPU_TOK_S_AT_16
    per_seq = (step_at_16 - GPU_TPOT_AT_4_MS) / 12
    return StepTime(GPU_TPOT_AT_4_MS - 4 * per_seq, per_seq, GPU_OUTPUT_TOKENS)


def usl(lam: float, sigma: float, kappa: float) -> Callable[[float], float]:
    """The Universal Scalability Law X(N) = lam N / (1 + sigma (N-1) + kappa N (N-1))."""
    return lambda n: lam * n / (1 + sigma * (n - 1) + kappa * n * (n - 1))


@dataclass(frozen=True)
class Curve:
    """A knob's true behaviour over ``low..high`` (or over ``values`` when categorical)."""

    name: str
    throughput: Callable[[object], float]
    low: int = 1
    high: int = 64
    launch_ceiling: int | None = None       # a launch above this fails (OOM)
    slo_edge: float | None = None           # TTFT p99 reaches the SLO at this value
    values: tuple = field(default_factory=tuple)   # categorical values, in listed order
    gpu: bool = False
    steps: StepTime | None = None           # the step-time model behind ``throughput``

    @property
    def categorical(self) -> bool:
        """True for a categorical knob."""
        return bool(self.values)

    def ttft_ratio(self, value) -> float:
        """TTFT p99 / SLO: grows as the square of the value, 1 at ``slo_edge``."""
        return 0.0 if self.slo_edge is None else (float(value) / self.slo_edge) ** 2

    def starts(self, value) -> bool:
        """False when a launch with this value fails the way vLLM fails (out of memory)."""
        return self.launch_ceiling is None or value <= self.launch_ceiling

    def acceptable(self, value) -> bool:
        """Starts and meets the SLO in truth."""
        return self.starts(value) and self.ttft_ratio(value) <= 1.0

    def ttft_ms(self, value: float, quantile: float) -> float:
        """The true TTFT quantile (ms) of a closed loop at ``value`` in flight: the queue
        wait of the requests beyond the batch, ``(N - batch) / X`` (Little's law on the
        queue), then the admission wait (``quantile`` of one step: a request arrives
        uniformly within the running step) and its own prefill step, plus
        :data:`TTFT_OVERHEAD_MS` (HTTP, tokenizing). Without a step model (a USL curve)
        the batch is every request at :data:`CPU_OUTPUT_TOKENS` output tokens."""
        out = self.steps.output_tokens if self.steps else CPU_OUTPUT_TOKENS
        batch = self.steps.batch(value) if self.steps else value
        rate = self.throughput(value)
        step_s = batch / (rate * out)
        return 1000.0 * ((value - batch) / rate + (1.0 + quantile) * step_s) + \
            TTFT_OVERHEAD_MS

    def grid(self) -> list:
        """Every value a search may choose."""
        return list(self.values) if self.categorical else list(range(self.low, self.high + 1))

    def true_best(self) -> float:
        """The largest true throughput among acceptable values."""
        return max(self.throughput(v) for v in self.grid() if self.acceptable(v))

    def true_knee(self, threshold: float) -> object:
        """The smallest acceptable value within ``threshold`` of :meth:`true_best`."""
        best = self.true_best()
        return next(v for v in self.grid()
                    if self.acceptable(v) and self.throughput(v) >= (1 - threshold) * best)

    def ratio(self, value) -> float:
        """True throughput of ``value`` over the true best; 0 when not acceptable."""
        if value is None or not self.acceptable(value):
            return 0.0
        return self.throughput(value) / self.true_best()


def curves() -> dict[str, Curve]:
    """The shapes every strategy is judged on."""
    cpu, gpu, capped = cpu_step_time(), gpu_step_time(), cpu_step_time(batch_cap=20)
    rise_fall = usl(8.0, 0.02, 0.0006)
    categorical = {"auto": 1.0, "fp8": 0.98, "fp8_e5m2": 0.96}
    return {
        "monotone": Curve("monotone", cpu.throughput, steps=cpu),
        "monotone-gpu": Curve("monotone-gpu", gpu.throughput, high=256, gpu=True, steps=gpu),
        "knee-flat": Curve("knee-flat", capped.throughput, steps=capped),
        "rise-fall": Curve("rise-fall", rise_fall),
        "oom-ceiling": Curve("oom-ceiling", cpu.throughput, launch_ceiling=40, steps=cpu),
        "slo-edge": Curve("slo-edge", cpu.throughput, slo_edge=24.5, steps=cpu),
        "categorical": Curve("categorical", lambda v: 60.0 * categorical[v],
                             values=tuple(categorical)),
    }


def peak_of(curve: Curve) -> float:
    """Where the curve's true throughput peaks (for descriptions and tests)."""
    grid = [v for v in curve.grid() if curve.acceptable(v)]
    return max(grid, key=lambda v: (curve.throughput(v), -float(v) if not
                                    isinstance(v, str) else 0)) if grid else math.nan


#: the tune's categorical knob and its true effect on throughput (the best is 64)
TUNE_KNOB = "block_size"
TUNE_EFFECTS = {32: 1.00, 64: 1.03, 128: 0.97}


@dataclass(frozen=True)
class Surface:
    """A tune's ground truth: a max_num_seqs curve times a categorical knob's effect."""

    curve: Curve
    effects: dict = field(default_factory=lambda: dict(TUNE_EFFECTS))
    knob: str = TUNE_KNOB

    @property
    def name(self) -> str:
        """The curve's name."""
        return self.curve.name

    def throughput(self, seqs: int, choice) -> float:
        """True req/s at max_num_seqs ``seqs`` with the knob at ``choice``."""
        return self.curve.throughput(seqs) * self.effects[choice]

    def best(self) -> tuple[dict, float]:
        """The true best configuration (the smallest max_num_seqs of a tie) and its req/s."""
        configs = [{"max_num_seqs": seqs, self.knob: choice} for choice in self.effects
                   for seqs in self.curve.grid() if self.curve.acceptable(seqs)]
        best = max(configs, key=lambda c: (self.throughput(c["max_num_seqs"], c[self.knob]),
                                           -c["max_num_seqs"]))
        return best, self.throughput(best["max_num_seqs"], best[self.knob])

    def ratio(self, params: dict | None) -> float:
        """True req/s of ``params`` over the true best; 0 when none or not acceptable."""
        if params is None or not self.curve.acceptable(params["max_num_seqs"]):
            return 0.0
        return self.throughput(params["max_num_seqs"], params[self.knob]) / self.best()[1]


def surfaces() -> dict[str, Surface]:
    """Every numeric curve times the knob's effect (:data:`TUNE_EFFECTS`)."""
    return {name: Surface(curve) for name, curve in curves().items() if not curve.categorical}
