"""The eval's ``report.md``: sampling, own figures, comparison with the baseline, the gate."""

from __future__ import annotations

from typing import Any

WORST_PROMPTS = 8


def fmt(value: Any, digits: int = 4) -> str:
    """A figure for a table: None as '-', floats with ``digits`` significant digits."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


FIDELITY_ROWS = (
    ("exact match rate (share of prompts)", "exact_match_rate"),
    ("prompts that diverged", "diverged"),
    ("mean first diverging token (diverged prompts)", "mean_first_divergence"),
    ("top-1 agreement (teacher-forced, per position)", "top1_agreement"),
    ("mean KL(baseline || candidate), nats/position", "mean_kl"),
    ("max KL, nats", "max_kl"),
    ("positions compared", "positions"),
)


def _own(outcome) -> list[str]:
    result = outcome.result
    figures = result.figures()
    sampling = result.config.sampling
    lines = [f"- sampling: seed {sampling.seed} (repeat r uses seed + r), temperature "
             f"{sampling.temperature:g}, top_p {sampling.top_p:g}, max_tokens "
             f"{sampling.max_tokens}, top-{sampling.logprobs} logprobs; "
             f"{figures['repeats']} repeat(s), {result.config.concurrency} in flight",
             f"- items: {figures['items']}; failed requests: {figures['failed_requests']}"]
    if figures["accuracy"] is not None:
        per = ", ".join(f"{a:.3f}" for a in figures["accuracy_per_repeat"])
        lines.append(f"- task accuracy: {figures['accuracy']:.3f} (per repeat: {per}; "
                     f"spread {figures['accuracy_spread']:.3f})")
    for task, score in figures["lm_eval"].items():
        stderr = f" ± {score['stderr']:.3f}" if score["stderr"] is not None else ""
        lines.append(f"- lm-eval {task}: {score['metric']} {score['value']:.3f}{stderr}")
    timings = ", ".join(f"{k} {v:.1f} s" for k, v in result.timings_s.items() if v is not None)
    lines.append(f"- time: {timings}")
    return lines


def _comparison(outcome) -> list[str]:
    comparison = outcome.comparison
    figures = comparison.figures()
    lines = ["", f"## Against baseline {comparison.baseline_run}", "",
             "| figure | value |", "|---|---|"]
    lines += [f"| {label} | {fmt(figures.get(key))} |" for label, key in FIDELITY_ROWS]
    if comparison.accuracy is not None:
        acc = comparison.accuracy
        lines.append(f"| task accuracy, baseline -> candidate | {acc.baseline_mean:.3f} -> "
                     f"{acc.candidate_mean:.3f} (noise {acc.noise:.3f}) |")
    for task in comparison.lm_eval:
        lines.append(f"| lm-eval {task['task']}, baseline -> candidate | "
                     f"{task['baseline']:.3f} -> {task['candidate']:.3f} "
                     f"(noise {task['noise']:.3f}) |")
    worst = sorted((p for p in comparison.prompts if not p.exact_match or (p.mean_kl or 0) > 0),
                   key=lambda p: -(p.mean_kl or 0))[:WORST_PROMPTS]
    if worst:
        lines += ["", "Prompts that differ most (by mean KL):", "",
                  "| id | exact | first divergence | top-1 | mean KL |", "|---|---|---|---|---|"]
        lines += [f"| {p.id} | {fmt(p.exact_match)} | {fmt(p.first_divergence)} | "
                  f"{fmt(p.top1_agreement)} | {fmt(p.mean_kl)} |" for p in worst]
    return lines


def _gate(outcome) -> list[str]:
    gate = outcome.gate
    lines = ["", f"## Quality gate: {'PASSED' if gate.passed else 'FAILED'}", ""]
    if gate.checks:
        lines += ["| check | threshold | value | verdict |", "|---|---|---|---|"]
        lines += [f"| {c.name} | {c.threshold:g} | {fmt(c.value)} | "
                  f"{'pass' if c.passed else 'FAIL'}: {c.reason} |" for c in gate.checks]
    else:
        lines += [f"- {reason}" for reason in gate.reasons] or ["- no thresholds set"]
    return lines


def render_eval_report(outcome, loaded) -> str:
    """Markdown report of an eval outcome (``quality.evaluate.EvalOutcome``)."""
    result = outcome.result
    name = loaded.name if loaded is not None else "endpoint"
    lines = [f"# Eval {result.run_id}: {result.status}", "", f"Recipe: {name}", ""]
    if result.failure:
        lines += [f"**Failed:** {result.failure}", ""]
    lines += _own(outcome)
    if outcome.comparison is not None:
        lines += _comparison(outcome)
    if outcome.gate is not None:
        lines += _gate(outcome)
    return "\n".join(lines) + "\n"
