"""The gate's verdict: thresholds, noise, missing figures, failed evals."""

from model_optimizer.quality.compare import Comparison
from model_optimizer.quality.config import Thresholds
from model_optimizer.quality.fidelity import FidelitySummary
from model_optimizer.quality.gate import judge
from model_optimizer.quality.scoring import AccuracyComparison


def comparison(kl=0.002, top1=0.99, exact=0.9, accuracy=None, lm_eval=()):
    fidelity = FidelitySummary(prompts=10, exact_match_rate=exact, diverged=1,
                               mean_first_divergence=3.0, positions=100, top1_agreement=top1,
                               mean_kl=kl, max_kl=kl * 5)
    return Comparison("base-run", "cand-run", [], fidelity, [exact], accuracy, list(lm_eval))


def test_no_thresholds_pass_with_the_figures():
    result = judge(comparison(), Thresholds())
    assert result.passed and result.checks == [] and result.figures["mean_kl"] == 0.002
    assert (result.baseline_run, result.candidate_run) == ("base-run", "cand-run")


def test_a_kl_above_the_threshold_fails_and_says_why():
    result = judge(comparison(kl=0.002), Thresholds(max_mean_kl=0.001, min_top1_agreement=0.9))
    assert not result.passed
    assert result.reasons == ["mean KL 0.002 above the maximum 0.001"]
    assert [c.passed for c in result.checks] == [True, False]
    assert "quality gate failed: mean KL 0.002 above" in result.summary


def test_a_threshold_exactly_met_passes():
    result = judge(comparison(top1=0.95, exact=0.9),
                   Thresholds(min_top1_agreement=0.95, min_exact_match=0.9))
    assert result.passed, result.reasons


def test_accuracy_drop_fails_only_beyond_noise():
    real = AccuracyComparison(0.9, 0.6, 0.3, 0.0, 0.001, True)
    noisy = AccuracyComparison(0.9, 0.6, 0.3, 0.4, 0.2, False)
    assert not judge(comparison(accuracy=real), Thresholds(max_accuracy_drop=0.05)).passed
    verdict = judge(comparison(accuracy=noisy), Thresholds(max_accuracy_drop=0.05))
    assert verdict.passed and "within the noise" in verdict.reasons[0]


def test_lm_eval_task_drop_is_checked_per_task():
    task = {"task": "arith", "metric": "exact_match,none", "baseline": 0.8, "candidate": 0.4,
            "drop": 0.4, "noise": 0.1, "beyond_noise": True}
    result = judge(comparison(lm_eval=[task]), Thresholds(max_accuracy_drop=0.1))
    assert not result.passed and result.checks[0].name == "max_accuracy_drop[arith]"


def test_unmeasured_figures_and_failed_evals_fail():
    missing = comparison(top1=None)
    assert not judge(missing, Thresholds(min_top1_agreement=0.5)).passed
    assert not judge(comparison(), Thresholds(max_accuracy_drop=0.1)).passed
    failed = judge(None, Thresholds(), failure="server failed to start")
    assert not failed.passed and failed.reasons == ["eval failed: server failed to start"]
