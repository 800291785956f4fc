"""Per-class objectives and per-class SLO constraints in tune."""

from model_optimizer.load.classes import figure
from model_optimizer.search.tune.evaluate import slo_bounds, slo_margin
from model_optimizer.search.tune.space import TuneConfig

METRICS = {"goodput_qps": 9.0, "ttft_p99_ms": 400.0,
           "classes": {"short": {"goodput_qps": 7.0, "ttft_p99_ms": 150.0}}}


def test_class_bounds_become_class_constraints():
    recipe = {"slo": {"ttft_p99_ms": 500, "e2e_p99_ms": None,
                      "classes": {"short": {"ttft_p99_ms": 100, "e2e_p99_ms": None}}}}
    bounds = slo_bounds(recipe)
    assert bounds == {"ttft_p99_ms": 500, "short:ttft_p99_ms": 100}
    assert slo_margin("ttft_p99_ms", 500, METRICS) < 0
    assert slo_margin("short:ttft_p99_ms", 100, METRICS) == 0.5  # 150 ms is 50 % over
    assert slo_margin("long:ttft_p99_ms", 100, METRICS) == 1.0  # no figures: violated


def test_objective_class_reads_that_class_figure():
    tune = {"params": {"max_num_seqs": {"type": "int", "low": 1, "high": 4}},
            "objective": "goodput", "n_trials": 2, "sampler": "tpe", "seed": 0, "repeats": 1,
            "objective_class": "short"}
    config = TuneConfig.from_recipe(tune)
    assert config.metric == "short:goodput_qps"
    assert figure(METRICS, config.metric) == 7.0 and figure(METRICS, "goodput_qps") == 9.0
    assert TuneConfig.from_dict(config.to_dict()).metric == "short:goodput_qps"
    assert TuneConfig.from_recipe({**tune, "objective_class": None}).metric == "goodput_qps"
