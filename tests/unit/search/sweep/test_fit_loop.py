"""The sweep loop with ``--strategy probe-fit``: the fitted knee, its verdict in the revision,
and ``--strict`` refusing a knee that is not resolved."""

import json
import random

import yaml

from model_optimizer.recipe import load_recipe
from model_optimizer.search.measure import Measurement
from model_optimizer.search.sweep.flags import SweepFlags
from model_optimizer.search.sweep.loop import start_sweep
from tests.unit.search.sweep.test_loop import FakeMeasure, recipe  # noqa: F401 - the fixture


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
    # the fitted curve, kept for the report: over the measured levels and the midpoints
    summary = json.loads((outcome.archive / "summary.json").read_text())
    fit = summary["fit"]
    measured = sorted({row["value"] for row in summary["steps"] if row["status"] == "ok"})
    assert fit["levels"] == measured and set(measured) < set(fit["grid"])
    assert fit["windows"] == sum(row["status"] == "ok" for row in summary["steps"])
    key = fit["metric"]
    assert key == summary["objective"]  # the figure the knee is fitted on
    assert all(low <= mid <= high for low, mid, high in zip(fit[f"{key}_low"], fit[key],
                                                            fit[f"{key}_high"], strict=True))
    html = (outcome.archive / "report.html").read_text()
    assert 'class="band"' in html and 'id="predicted"' in html
    assert "Predicted from the fitted curve" in html
    assert "on the real engine and in the simulator" in html
    # report.md: the same predictions, labelled as the fit's, one row per level not measured
    assert "**Predicted from the fitted curve** at levels not measured" in report
    unmeasured = [x for x in fit["grid"] if x not in fit["levels"]]
    assert sum(line.startswith(f"| {x:,.1f} | ") for x in unmeasured
               for line in report.splitlines()) == len(unmeasured)
    assert "held-out error on the real engine and in the simulator" in report


def test_strict_refuses_a_knee_that_is_not_resolved(recipe, tmp_path):  # noqa: F811
    outcome, out = fit_sweep(recipe, tmp_path, NoisyMeasure(), strict=True)
    assert outcome.written is None and not out.exists()
    assert outcome.exit_code == 4
    assert "not resolved at this noise" in outcome.reason
    report = (outcome.archive / "report.md").read_text()
    assert "not resolved at this noise" in report
