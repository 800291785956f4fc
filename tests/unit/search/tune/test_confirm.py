"""The confirmation checks the throughput: a confirmed figure whose interval lies below the
scan figure's makes the choice "not resolved"; a runner-up that may be as good is confirmed
side by side, and the higher confirmed figure is written; a runner-up the confirmed winner
clearly leads is not launched."""

from __future__ import annotations

import optuna
import pytest

from model_optimizer.search.tune.confirm import ConfirmVerdict, tune_noise
from model_optimizer.search.tune.outputs import ranked_feasible, render_report

from .fake_scan import FakeEngine, make_scanner

DISTRIBUTIONS = {"max_num_seqs": optuna.distributions.IntDistribution(1, 64, log=True),
                 "block_size": optuna.distributions.CategoricalDistribution([32, 64])}


def add_feasible(study: optuna.Study, config, params: dict, qps: float, half: float) -> None:
    """A feasible scanned level at ``qps`` +- ``half``."""
    study.add_trial(optuna.trial.create_trial(
        params=params, distributions=DISTRIBUTIONS, values=[qps],
        user_attrs={"status": "ok", "feasible": True, "half_width": half, "samples": [qps],
                    "figures": {"qps": qps}}))


def confirm(engine: FakeEngine, scanned: list[tuple[dict, float, float]]) -> ConfirmVerdict:
    scanner, study, config = make_scanner(engine)
    for params, qps, half in scanned:
        add_feasible(study, config, params, qps, half)
    return scanner.confirm(ranked_feasible(study.get_trials(), config))


WINNER = {"max_num_seqs": 32, "block_size": 64}
RUNNER_UP = {"max_num_seqs": 32, "block_size": 32}


def test_a_confirmed_figure_below_the_scan_figure_is_not_resolved():
    engine = FakeEngine(confirm_qps={(32, 64): (80.0, 4.0)})
    verdict = confirm(engine, [(WINNER, 100.0, 5.0)])   # no runner-up: one feasible trial
    assert verdict.trial.params == WINNER and engine.confirmed == [WINNER]
    assert not verdict.resolved
    assert "below its scan window's 100 ± 5" in verdict.warnings[0]
    assert "NOT RESOLVED" in verdict.note()


def test_a_confirmed_figure_inside_the_scan_interval_is_resolved():
    engine = FakeEngine(confirm_qps={(32, 64): (97.0, 4.0)})
    verdict = confirm(engine, [(WINNER, 100.0, 5.0)])
    assert verdict.resolved and verdict.note() == ""


def test_a_confirmed_figure_without_an_interval_proves_nothing():
    engine = FakeEngine(confirm_qps={(32, 64): (80.0, None)})   # too few requests for one
    verdict = confirm(engine, [(WINNER, 100.0, 5.0)])
    assert verdict.trial.params == WINNER
    # no "below its scan window" from a bare figure; but 80 against 100 is a reading, and
    # the noise it shows (15.7%) leaves the choice not resolved all the same
    [warning] = verdict.warnings
    assert "below its scan" not in warning and "CV of 15.7%" in warning


def test_the_runner_up_is_confirmed_side_by_side_and_the_higher_confirmed_is_written():
    # the winner's scan window was lucky: its own launch reads 94, and the runner-up's scan
    # (97 +- 5) is not below that, so it gets a launch too and confirms higher
    engine = FakeEngine(confirm_qps={(32, 64): (94.0, 3.0), (32, 32): (96.0, 3.0)})
    verdict = confirm(engine, [(WINNER, 100.0, 5.0), (RUNNER_UP, 97.0, 5.0)])
    assert engine.confirmed == [WINNER, RUNNER_UP]
    assert verdict.trial.params == RUNNER_UP and verdict.figures["qps"] == 96.0
    assert verdict.runner_up is not None
    assert "side by side" in verdict.note() and "runner-up confirmed higher" in verdict.note()
    # 96 by its own launch against block_size 64's 100 and 94: a tie within the noise, so
    # the margin over block_size 64 is not shown (``search/tune/margin.py``)
    [warning] = verdict.warnings
    assert not verdict.resolved and "cannot tell {'block_size': 64} apart" in warning


def test_a_runner_up_below_the_winners_confirmed_figure_is_not_launched():
    engine = FakeEngine(confirm_qps={(32, 64): (99.0, 3.0)})
    verdict = confirm(engine, [(WINNER, 100.0, 5.0), (RUNNER_UP, 90.0, 1.0)])
    assert engine.confirmed == [WINNER]                 # 90 +- 1 lies below 99 +- 3
    assert verdict.trial.params == WINNER and verdict.runner_up is None and verdict.resolved


def test_both_confirmed_lower_the_best_is_kept_and_flagged():
    engine = FakeEngine(confirm_qps={(32, 64): (85.0, 3.0), (32, 32): (80.0, 3.0)})
    verdict = confirm(engine, [(WINNER, 100.0, 5.0), (RUNNER_UP, 97.0, 5.0)])
    assert engine.confirmed == [WINNER, RUNNER_UP]
    assert verdict.trial.params == WINNER and not verdict.resolved


def test_the_report_says_not_resolved(make_recipe):
    from model_optimizer.recipe import load_recipe
    from model_optimizer.search.tune.space import TuneConfig

    engine = FakeEngine(confirm_qps={(32, 64): (80.0, 4.0)})
    verdict = confirm(engine, [(WINNER, 100.0, 5.0)])
    loaded = load_recipe(make_recipe())
    config = TuneConfig.from_recipe(loaded.resolved["tune"])
    summary = {"study": "s", "storage": "mem", "launches": 1, "windows": 1, "machine": "m",
               "trials_here": [], "strategy": "scan", "stop": {"reason": "budget"},
               "confirmations": [], "written": "out.yaml", "importances": None,
               "importances_unavailable": "too few", "effects": {}, "reason": "",
               "confirmation": verdict.to_dict()}
    text = render_report("tune-1", loaded, config, summary, [], [], verdict.trial)
    assert "**Not resolved**: trial" in text and "did not hold up" in text


def test_the_progress_log_shows_each_confirmed_figure():
    import io

    from rich.console import Console

    from model_optimizer.cli.tune import TuneProgress
    from model_optimizer.events import TuneConfirmed

    out = io.StringIO()
    show = TuneProgress(Console(file=out, width=200)).handlers()[TuneConfirmed]
    for half in (0.8, None):
        show(TuneConfirmed(1, {}, True, [], "run", {}, "now", {"value": 41.24, "half_width": half}))
    assert "confirmed (41.24 ± 0.80 by its own launch)" in out.getvalue()
    assert "confirmed (41.24 by its own launch)" in out.getvalue()


def test_readings_that_vary_beyond_the_plateau_threshold_leave_the_choice_not_resolved():
    """The winner's own launch agrees with its scan (98 vs 100), but a level two trials'
    scans read at 60 and 75 shows the noise the ranking rests on: 11.2% pooled, above 5%."""
    engine = FakeEngine(confirm_qps={(32, 64): (98.0, 3.0)})
    level = {"max_num_seqs": 8, "block_size": 32}
    verdict = confirm(engine, [(WINNER, 100.0, 5.0), (level, 60.0, 3.0), (level, 75.0, 3.0)])
    assert verdict.trial.params == WINNER and not verdict.resolved
    [warning] = verdict.warnings
    assert "2 configurations read more than once (4 readings)" in warning
    assert "CV of 11.2%, above the 5% plateau threshold" in warning
    assert "NOT RESOLVED" in verdict.note()


def test_the_noise_pools_each_configurations_readings_and_leaves_copies_out():
    def trial(qps: float, **attrs) -> optuna.trial.FrozenTrial:
        return optuna.trial.create_trial(params=WINNER, distributions=DISTRIBUTIONS,
                                         values=[qps], user_attrs=attrs)

    scanned, twin = trial(100.0), trial(100.0, duplicate_of=0)   # a twin copies the window
    confirmed = [{"ok": True, "params": WINNER, "objective": {"value": 90.0}},
                 {"ok": False, "params": RUNNER_UP, "objective": {"value": 10.0}}]
    noise = tune_noise([scanned, twin], confirmed, "qps")
    # 100 (scan) and 90 (own launch): sd 7.07 over a mean of 95; the twin and the rejected
    # launch are not readings
    assert noise == {"cv": pytest.approx(7.0711 / 95, rel=1e-4), "values": 1, "windows": 2}
    assert tune_noise([scanned], [], "qps") is None        # nothing read twice


def test_a_winner_below_a_launch_that_did_not_fit_is_judged_on_the_range_cut_off():
    """The simulator's OOM ceiling: 64 did not start, the scan ran to 32 on the CPU curve
    (its figures, exact); 33..63 were not measured and rise to 0.86 of 32's value there, so
    the sweep's cut-range check leaves the confirmed winner not resolved."""
    from model_optimizer.search.simulate.truth import cpu_step_time
    from model_optimizer.search.tune.ceiling import LAUNCHES_ATTR

    curve = cpu_step_time()
    engine = FakeEngine(confirm_qps={(32, 64): (curve.throughput(32), 2.0)})
    scanner, study, config = make_scanner(engine)
    for seqs in (1, 2, 4, 8, 16, 32):
        qps = curve.throughput(seqs)
        add_feasible(study, config, {"max_num_seqs": seqs, "block_size": 64}, qps, 0.05 * qps)
    study.add_trial(optuna.trial.create_trial(
        params={"max_num_seqs": 64, "block_size": 64}, distributions=DISTRIBUTIONS,
        values=[0.0], user_attrs={"status": "failed", "failure_kind": "oom", "feasible": False,
                                  LAUNCHES_ATTR: [{"max_num_seqs": 64, "started": False,
                                                   "failure": "oom"}]}))
    verdict = scanner.confirm(ranked_feasible(study.get_trials(), config))
    assert verdict.trial.params == WINNER and not verdict.resolved
    [warning] = verdict.warnings
    assert "did not start for memory" in warning and "33..63" in warning
