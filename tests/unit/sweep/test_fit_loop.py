"""The sweep loop with ``--strategy probe-fit``: the fitted knee, its verdict in the revision,
and ``--strict`` refusing a knee that is not resolved."""

import random

import yaml

from model_optimizer.measure import Measurement
from model_optimizer.recipe import load_recipe
from model_optimizer.sweep.flags import SweepFlags
from model_optimizer.sweep.loop import start_sweep
from tests.unit.sweep.test_loop import FakeMeasure, recipe  # noqa: F401 - the fixture


class NoisyMeasure(FakeMeasure):
    """The same curve read through heavy noise (CV ~60%), seeded."""

    def __init__(self):
        super().__init__()
        self.rng = random.Random(5)

    def __call__(self, step, value):
        measured = super().__call__(step, value)
        qps = measured.samples[0] * self.rng.choice([0.25, 0.6, 1.0, 1.5, 2.2])
        return Measurement("ok", samples=[qps], slo_met=True, preemptions=0,
                           run_ids=measured.run_ids, figures={**measured.figures, "qps": qps})


def fit_sweep(recipe, tmp_path, measure, strict=False):  # noqa: F811
    loaded = load_recipe(recipe, ["sweep.confirm_duration_s=0", "workload.concurrency=null",
                                  "sweep.max=64"])
    out = tmp_path / "out.yaml"
    outcome = start_sweep(loaded, tmp_path / "runs", output=out, measure=measure,
                          flags=SweepFlags(start=1, strategy="probe-fit", strict=strict))
    return outcome, out


def test_probe_fit_writes_the_fitted_knee_and_its_verdict(recipe, tmp_path):  # noqa: F811
    outcome, out = fit_sweep(recipe, tmp_path, FakeMeasure())
    assert outcome.exit_code == 0
    written = yaml.safe_load(out.read_text())
    knee = written["validated"]["knee"]
    # the table rises to 23.0 at 8 and is flat after (23.6-24.0): the smooth USL puts the
    # knee a little past the hard corner (within 1/8 of 18 here), far below 64
    assert knee["resolved"] is True and 8 <= knee["value"] <= 20
    assert written["engine"]["max_num_seqs"] == knee["value"]
    report = (outcome.archive / "report.md").read_text()
    assert "**resolved**" in report


def test_strict_refuses_a_knee_that_is_not_resolved(recipe, tmp_path):  # noqa: F811
    outcome, out = fit_sweep(recipe, tmp_path, NoisyMeasure(), strict=True)
    assert outcome.written is None and not out.exists()
    assert outcome.exit_code == 4
    assert "not resolved at this noise" in outcome.reason
    report = (outcome.archive / "report.md").read_text()
    assert "not resolved at this noise" in report
