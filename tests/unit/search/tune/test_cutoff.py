"""The range above a scanning tune's winner that a failure cut off, judged by the sweep's
cut-range rule (``search/sweep/fitscan.py`` ``cut_hides``, defined once): an OOM ceiling
lowered below 64, or an SLO missed at the next scanned level, leaves a range the tune never
measured; the winner stays resolved only where the curve fitted to its knobs' windows is
flat there."""

from __future__ import annotations

import math
import random

import optuna
import pytest
from optuna.trial import TrialState

from model_optimizer.search.core.cutrange import cut_hides
from model_optimizer.search.core.fit import Window
from model_optimizer.search.simulate.truth import cpu_step_time
from model_optimizer.search.tune.ceiling import LAUNCHES_ATTR
from model_optimizer.search.tune.cutoff import cut_off, cut_range

DISTRIBUTIONS = {"max_num_seqs": optuna.distributions.IntDistribution(1, 64, log=True),
                 "block_size": optuna.distributions.CategoricalDistribution([32, 64, 128])}
CPU = cpu_step_time()   # the simulator's CPU curve: 69.4 req/s at 32, 73.3 at 40, 80.9 at 63


def trial(number: int, seqs: int, qps: float, *, feasible: bool = True, status: str = "ok",
          block_size: int = 64, **attrs) -> optuna.trial.FrozenTrial:
    made = optuna.trial.create_trial(
        params={"max_num_seqs": seqs, "block_size": block_size},
        distributions=DISTRIBUTIONS, value=qps, state=TrialState.COMPLETE,
        user_attrs={"status": status, "feasible": feasible, **attrs})
    made.number = number
    return made


def scanned(levels: list[int], seed: int, cv: float = 0.05) -> list[optuna.trial.FrozenTrial]:
    """One window per level of the CPU curve under seeded lognormal noise of ``cv``."""
    rng, sigma = random.Random(seed), math.sqrt(math.log(1 + cv * cv))
    return [trial(n, level, CPU.throughput(level) * math.exp(rng.gauss(-sigma ** 2 / 2, sigma)))
            for n, level in enumerate(levels)]


def oom_at(number: int, level: int) -> optuna.trial.FrozenTrial:
    """A trial whose scan server at ``level`` did not start (the asked level recorded as a
    failed trial, objective 0)."""
    return trial(number, level, 0.0, feasible=False, status="failed", failure_kind="oom",
                 **{LAUNCHES_ATTR: [{"max_num_seqs": level, "started": False,
                                     "failure": "oom"}]})


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_a_winner_under_a_lowered_memory_ceiling_is_not_resolved(seed):
    # the simulator's oom-ceiling surface: 64 did not start, the scan ran to 32; 33..63 were
    # never measured, where the CPU curve rises to 0.86 of its value (32 / 63)
    trials = [oom_at(99, 64), *scanned([1, 2, 4, 8, 16, 32], seed)]
    chosen = trials[-1]
    cut = cut_range(chosen, trials, "max_num_seqs")
    assert cut is not None and (cut.value, cut.boundary) == (32, 64)
    assert "did not start for memory" in cut.why and len(cut.windows) == 6
    words = cut_off(chosen, trials, "max_num_seqs", 0.05)
    assert len(words) == 1 and "33..63" in words[0] and "cut-range" in words[0]


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_a_winner_just_below_the_failed_launch_stays_resolved(seed):
    # 40 started and 44 did not: 41..43 can hold at most 1.5% more (the truth: 0.979)
    trials = [oom_at(99, 44), *scanned([1, 2, 4, 8, 16, 32, 40], seed)]
    assert cut_range(trials[-1], trials, "max_num_seqs").boundary == 44
    assert cut_off(trials[-1], trials, "max_num_seqs", 0.05) == []


@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_a_winner_below_a_level_that_missed_the_slo_is_not_resolved(seed):
    # the simulator's slo-edge surface: the SLO edge lies at 24.5; the scan measured 16 and an
    # asked 20 within it and 32 beyond it: 21..31 were never measured
    trials = [*scanned([1, 2, 4, 8, 16, 20], seed), trial(50, 32, 70.0, feasible=False)]
    chosen = trials[5]
    cut = cut_range(chosen, trials, "max_num_seqs")
    assert (cut.boundary, len(cut.windows)) == (32, 6) and "SLO missed" in cut.why
    assert "21..31" in cut_off(chosen, trials, "max_num_seqs", 0.05)[0]


def test_nothing_is_judged_without_a_failure_above_the_winner():
    trials = scanned([1, 2, 4, 8, 16, 32, 64], 0)
    assert cut_range(trials[-1], trials, "max_num_seqs") is None        # the space's top
    assert cut_range(trials[4], trials, "max_num_seqs") is None         # all above feasible
    # another block_size's infeasible level is not this combination's boundary
    other = [*trials[:6], trial(60, 48, 0.0, feasible=False, block_size=128)]
    assert cut_range(other[5], other, "max_num_seqs") is None
    # a copied twin is not a measurement of its own
    twin = [*trials[:6], trial(61, 48, 0.0, feasible=False, duplicate_of=3)]
    assert cut_range(twin[5], twin, "max_num_seqs") is None


def test_too_few_windows_to_fit_show_nothing_flat():
    windows = [Window(16.0, 55.0), Window(32.0, 69.0)]
    assert cut_hides(32, windows, 64, 0.05)
