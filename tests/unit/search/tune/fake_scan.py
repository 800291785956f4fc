"""A scanning tune's engine, faked behind ``ScanHost``: scan servers that do not start above
``fits`` sequences (with the failure class ``failure``), windows whose throughput is the
batch size, and confirming runs that read what a test says; an in-memory study."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import optuna

from model_optimizer.engine.classify import Failure
from model_optimizer.recipe import load_recipe_text
from model_optimizer.runner import RunOutcome
from model_optimizer.search.measure import Measurement
from model_optimizer.search.tune.evaluate import TrialResult, slo_bounds, trial_verdict
from model_optimizer.search.tune.host import ScanHost
from model_optimizer.search.tune.scan import TrialScanner
from model_optimizer.search.tune.space import TuneConfig
from model_optimizer.search.tune.study import open_study
from model_optimizer.search.tune.trials import tell_verdict

RECIPE = """recipe_version: 1
name: fake
model: {path: /fake/model, served_name: fake}
engine: {block_size: 32, max_model_len: 512, max_num_seqs: 8, max_num_batched_tokens: 2048}
hardware: {accelerator: cpu, memory_gib: 2}
workload: {endpoint: completions, prompt_tokens: 64, output_tokens: 32, concurrency: null,
           duration_s: 20}
slo: {ttft_p99_ms: 2000, min_success_rate: 1.0}
tune:
  params:
    max_num_seqs: {type: int_log, low: 1, high: 64}
    block_size: {type: categorical, choices: [32, 64]}
  n_trials: 12
"""


def ok_outcome(run_id: str, qps: float, half_width: float | None = 0.0) -> RunOutcome:
    """A good window (or confirming run) at ``qps`` with its interval, within the SLO."""
    metrics = {"requests": 10, "completed": 10, "failed": 0, "success_rate": 1.0,
               "qps": qps, "goodput_qps": qps, "ttft_p99_ms": 100.0, "slo_met": True,
               "intervals": {"qps": {"value": qps, "half_width": half_width}}}
    return RunOutcome("ok", Path("."), run_id, metrics)


@dataclass
class FakeEngine:
    """Launches at most ``fits`` sequences; records every launch's max_num_seqs."""

    fits: int = 64
    failure: str = "oom"
    confirm_qps: dict = field(default_factory=dict)   # (max_num_seqs, block_size) -> (v, hw)
    launched: list[int] = field(default_factory=list)
    measured: list[dict] = field(default_factory=list)
    confirmed: list[dict] = field(default_factory=list)

    def open_server(self, server, steps_dir, ceiling: int, emit, extra: dict) -> FakeServer:
        return FakeServer(self, ceiling)

    def run_one(self, step, steps_dir, *, on_event=None, archive_extra=None) -> RunOutcome:
        engine = step.resolved["engine"]
        key = (engine["max_num_seqs"], engine["block_size"])
        self.confirmed.append({"max_num_seqs": key[0], "block_size": key[1]})
        self.launched.append(key[0])
        value, half = self.confirm_qps.get(key, (float(key[0]), 0.0))
        return ok_outcome(f"confirm-{len(self.launched)}", value, half)

    def measure(self, step, number: int, params: dict) -> TrialResult:
        """The asked configuration alone (after a scan server failed for another reason)."""
        self.measured.append(dict(params))
        self.launched.append(int(params["max_num_seqs"]))
        return TrialResult(Measurement("failed", failure_kind=self.failure, reason="fake",
                                       run_ids=[f"run-{len(self.launched)}"]))


class FakeServer:
    """ScanServer's interface: starts when ``ceiling <= engine.fits``."""

    def __init__(self, engine: FakeEngine, ceiling: int):
        self.engine, self.ceiling, self.outcome = engine, ceiling, None

    def __enter__(self) -> FakeServer:
        self.engine.launched.append(self.ceiling)
        if self.started:
            self.outcome = RunOutcome("ok", Path("."), f"server-{len(self.engine.launched)}")
        else:
            self.outcome = RunOutcome("failed", Path("."), "failed", failure=Failure(
                self.engine.failure, "fake hint"))
        return self

    def __exit__(self, *exc_info) -> bool:
        return False

    @property
    def started(self) -> bool:
        return self.ceiling <= self.engine.fits

    def alive(self) -> bool:
        return self.started

    def window(self, level: int, extra: dict) -> RunOutcome:
        return ok_outcome(f"window-{level}", float(level))


class NoSession:
    model_config = None
    steps_dir = None

    def save(self) -> None:
        """Nothing is archived."""


def make_scanner(engine: FakeEngine) -> tuple[TrialScanner, optuna.Study, TuneConfig]:
    """A scanner over a fresh in-memory study of :data:`RECIPE`'s space."""
    loaded = load_recipe_text(RECIPE, "fake.yaml")
    config = TuneConfig.from_recipe(loaded.resolved["tune"])
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study, _ = open_study(optuna.storages.InMemoryStorage(), "fake", config,
                          optuna.samplers.RandomSampler(seed=0))
    bounds = slo_bounds(loaded.resolved)

    def tell(trial, params: dict, result: TrialResult, extra: dict | None = None) -> dict:
        verdict = trial_verdict(result, bounds, config, "fake", "fake")
        return tell_verdict(study, trial, params, verdict, extra)
    host = ScanHost(loaded, config, study, bounds, "fake", "fake", "tune-1", "fake",
                    NoSession(), [], lambda event: None, engine.measure, tell,
                    engine.open_server, engine.run_one)
    return TrialScanner(host), study, config


def run_trial(scanner: TrialScanner, study: optuna.Study, config: TuneConfig,
              params: dict) -> dict:
    """Ask the study for ``params`` and run it as a scanning trial; returns its record."""
    study.enqueue_trial(params)
    trial = study.ask()
    asked = {spec.name: spec.suggest(trial) for spec in config.params}
    return scanner.run(trial, asked)
