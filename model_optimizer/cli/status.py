"""`mopt status`: the current recipe, its validated figures, drift, preflight, recent runs,
and what to run next."""

from __future__ import annotations

from datetime import UTC, datetime

from model_optimizer.archive import runs_dir
from model_optimizer.archive.report import fmt
from model_optimizer.cli.common import JsonOption, RunsDirOption, console, handle_errors, print_json
from model_optimizer.history.current import ago
from model_optimizer.history.status import Status, gather

FIGURES = (("qps", "req/s", 2), ("goodput_qps", "goodput req/s", 2),
           ("output_tok_s", "output tok/s", 0), ("ttft_p50_ms", "TTFT p50 ms", 1),
           ("ttft_p99_ms", "TTFT p99 ms", 1), ("tpot_p50_ms", "TPOT p50 ms", 2),
           ("e2e_p99_ms", "E2E p99 ms", 0))


def _when(stamp: str | None, now: datetime) -> str:
    if not stamp:
        return "-"
    return f"{stamp[:16].replace('T', ' ')} UTC, {ago(stamp, now)}"


def _validated_lines(validated: dict | None, now: datetime) -> list[str]:
    if not validated:
        return ["validated: no (this revision has no measured figures)"]
    metrics = validated.get("metrics") or {}
    figures = ", ".join(f"{fmt(metrics[key], digits)} {label}" for key, label, digits in FIGURES
                        if metrics.get(key) is not None)
    lines = [f"validated: by {validated.get('by') or '-'} on {_when(validated.get('at'), now)} "
             f"(run {validated.get('run_id')})",
             f"  figures: {figures or '-'}",
             f"  measured with vLLM {validated.get('vllm_version') or '-'} on "
             f"{validated.get('hardware') or '-'}"]
    return lines + _resolved_lines(validated)


def _resolved_lines(validated: dict) -> list[str]:
    """A sweep's or tune's verdict on the choice it wrote (``validated.resolved``) and the
    machine's load while it measured; nothing for other writers."""
    if validated.get("resolved") is None:
        return []
    verdict = ("resolved" if validated["resolved"] else
               f"WRITTEN, NOT RESOLVED (why: mopt runs show {validated.get('run_id')})")
    load = validated.get("load_average") or {}
    busy = (f"; load average {load['median']:g} (max {load['max']:g}) while measuring"
            if load else "")
    return [f"  choice: {verdict}{busy}"]


def _recipe_lines(status: Status, now: datetime) -> list[str]:
    current = status.current
    if current is None:
        return ["current recipe: none (no archive here that verifies names a recipe file "
                "that still exists)"]
    recipe = status.recipe or {}
    lines = [f"current recipe: {current.path} ({recipe.get('name', '?')}, revision "
             f"{recipe.get('revision', current.revision)})",
             f"  last used {ago(current.last_used, now)} by {current.by} "
             f"(run {current.run_id}, {current.status})"]
    if current.passed_over:
        lines.append(f"  passed over (no longer there): {', '.join(current.passed_over)}")
    if current.untrusted:
        lines.append(f"  ignored (not trusted): {'; '.join(current.untrusted)}")
    if not recipe.get("valid", True):
        return lines + ["  does not validate:", *(f"    {e}" for e in recipe["errors"])]
    lines += _validated_lines(recipe.get("validated"), now)
    lines += [f"drift: {message}" for message in status.drift] or ["drift: none"]
    verification = status.verification
    if verification is not None:
        lines.append(f"verification: {verification['line']}"
                     + ("" if verification["here"] else " (not this environment)"))
        events = verification.get("events") or []
        if len(events) > 1:
            lines.append(f"  the revision's last {len(events)} verifications:")
            lines += [f"    {event['at'][:16].replace('T', ' ')}  {event['line']}"
                      for event in events]
    pre = status.preflight or {}
    for label, items in (("refuses", pre.get("refusals")), ("warns", pre.get("warnings"))):
        lines += [f"preflight {label}: {item['file']}:{item['line']}: {item['path']}: "
                  f"{item['message']}" for item in items or []]
    if pre and not pre.get("refusals") and not pre.get("warnings"):
        lines.append("preflight: ok (a launch here would pass its checks)")
    return lines


def _recent_lines(status: Status) -> list[str]:
    if not status.recent:
        return ["recent runs: none"]
    lines = [f"last {len(status.recent)} of {status.archives} archives:"]
    for row in status.recent:
        figures = f"{fmt(row.get('qps'), 2)} req/s" if row.get("qps") is not None else ""
        lines.append(f"  {row['id']}  {row['kind']:<8} {row.get('recipe_name') or '-'} rev "
                     f"{fmt(row.get('recipe_revision'))}  {row['status']}  {figures}".rstrip())
    return lines


def status_lines(status: Status, now: datetime | None = None) -> list[str]:
    """The status for people, one line per fact."""
    now = now or datetime.now(UTC)
    machine = status.machine
    lines = [f"runs dir: {status.runs_dir}",
             f"this machine: vLLM {machine.get('vllm') or 'not installed'} "
             f"({machine.get('vllm_distribution') or '-'}), {machine.get('hardware')}"
             + (f", driver {machine['driver']}" if machine.get("driver") else "")]
    lines += _recipe_lines(status, now)
    lines += _recent_lines(status)
    lines.append("next:")
    lines += [f"  {step['command']:<44} # {step['why']}" for step in status.next]
    return lines


@handle_errors
def status(runs_dir_opt: RunsDirOption = None, as_json: JsonOption = False) -> None:
    """Where am I: the current recipe (the one commands use when given none) and revision,
    its validated figures and when, drift of this machine against them, what the preflight
    says about launching it here, the last few runs (abandoned ones too), what to run next.
    Launches nothing. Exit 0."""
    report = gather(runs_dir(runs_dir_opt))
    if as_json:
        print_json(report.to_dict())
        return
    for line in status_lines(report):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
