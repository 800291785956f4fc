"""``mopt verify``: re-measure a validated revision and say whether its figures still hold.

The revision's ``validated.run_id`` names the measurement that validated it
(:mod:`.history.validation`); the revision is measured again with that measurement's
workload and budget: a fresh launch through the runner ``apply`` uses
(:func:`runner.run_recipe`), or, with a URL, the server already running there
(:func:`runner.bench_endpoint`). The new figures are judged against the validated ones by
the one verification rule (:mod:`.history.verify_rule`), which ``rollback --apply`` uses
too (through this module).

Every verification is archived (kind ``verify``, :mod:`.history.verifications`): the
measured run under its ``steps/``, ``verdict.json``, and in ``run.json`` the environment it
was measured in, so ``mopt status`` and ``apply --strict`` know which vLLM, hardware,
driver and checkpoint a revision was verified on. On a regression the result names what to
run next: a rollback to a revision that held here, a sweep, a tune.

A measured window the cross-check flags client-bound (:mod:`.crosscheck`) is not judged
(the rule's :func:`.history.verify_rule.judge`): the verdict is "not judged: client-bound
(...)", exit 2 (:data:`EXIT_NOT_JUDGED`), status ``failed:client_bound``, and the result
says how to measure the engine instead of the client.

On a GPU the verdict also compares the SM clocks both windows ran at (the rule's
``clocks``): when they differ, or one side recorded none, the verdict line, the report and
``--json`` (``clocks``) say so ("taken at different clocks: SM 1980 vs 1755 MHz"); the
verdict and the exit code stay the rule's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from model_optimizer.archive import STATUS_INTERRUPTED, RunArchive, failed_status, utc_now
from model_optimizer.archive.entry import config_hash, metric_fields
from model_optimizer.archive.names import (
    GIVEN_RECIPE,
    METRICS_FILE,
    REPORT_FILE,
    RUN_FILE,
    STEPS_DIR,
    VERDICT_FILE,
)
from model_optimizer.errors import EXIT_OK, EXIT_SLO_FAILED, EXIT_USAGE, UsageError
from model_optimizer.events import EventCallback
from model_optimizer.history import archives
from model_optimizer.history.drift import environment_here
from model_optimizer.history.validation import Validation, validating_measurement
from model_optimizer.history.verifications import (
    CLIENT_BOUND_STATUS,
    KIND,
    REGRESSED_STATUS,
    describe_environment,
    verifications,
)
from model_optimizer.history.verify_rule import Evidence, Verdict, judge
from model_optimizer.httpcall import HTTPCallError, call, join_url
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.runner import RunOutcome, bench_endpoint, run_recipe
from model_optimizer.secrets import redact_url

VERSION_DEADLINE_S = 5.0
VERSION_MAX_BYTES = 4096
#: a client-bound window: measured, but it cannot judge the engine; as "no figures to compare"
EXIT_NOT_JUDGED = EXIT_USAGE


@dataclass
class Target:
    """What is measured: a fresh launch (``url`` None) or the server at ``url``."""

    url: str | None = None
    model_name: str | None = None
    tokenizer_dir: str | None = None


@dataclass
class VerifyResult:
    """One verification: what was compared, measured and judged, and what to run next."""

    recipe_file: str
    name: str
    revision: int
    validation: Validation
    environment: dict
    outcome: RunOutcome
    verdict: Verdict | None          # None when the measurement itself failed
    archive: Path
    next: list[dict] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        """The measurement completed and no figure regressed beyond the noise."""
        return self.outcome.ok and self.verdict is not None and self.verdict.holds

    @property
    def client_bound(self) -> bool:
        """The measured window was client-bound, so nothing was judged."""
        return self.outcome.ok and self.verdict is not None \
            and self.verdict.client_bound is not None

    @property
    def exit_code(self) -> int:
        """0 holds, 4 regressed (or no figure could be compared), 2 a client-bound window
        (:data:`EXIT_NOT_JUDGED`), the run's code when it failed."""
        if not self.outcome.ok:
            return self.outcome.exit_code
        if self.client_bound:
            return EXIT_NOT_JUDGED
        return EXIT_OK if self.holds else EXIT_SLO_FAILED

    @property
    def word(self) -> str:
        """``holds``, ``regressed``, ``not judged``, ``not judged: client-bound (...)``, or
        the failed run's status."""
        if not self.outcome.ok or self.verdict is None:
            return self.outcome.status
        return f"{self.verdict.word}: {self.verdict.reason}" if self.client_bound \
            else self.verdict.word

    def to_dict(self) -> dict:
        """JSON form (``mopt verify --json``; ``rollback --apply``'s verification)."""
        return {"recipe_file": self.recipe_file, "name": self.name, "revision": self.revision,
                "verdict": self.word, "holds": self.holds, "exit_code": self.exit_code,
                "client_bound": self.verdict.client_bound if self.verdict else None,
                "clocks": self.verdict.clocks.to_dict() if self.verdict and self.verdict.clocks
                else None,
                "environment": self.environment, "validation": self.validation.to_dict(),
                "checks": [c.to_dict() for c in self.verdict.checks] if self.verdict else [],
                "regressed": [c.metric for c in self.verdict.regressed] if self.verdict
                else [], "rule": self.verdict.to_dict()["rule"] if self.verdict else None,
                "run": self.outcome.to_dict(), "archive": str(self.archive),
                "next": self.next}


# ----- where it is measured ------------------------------------------------------------------
def server_version(url: str, headers: dict[str, str] | None = None) -> str | None:
    """The vLLM version a server reports at ``/version`` (None when it does not say)."""
    try:
        reply = call("GET", join_url(url, "/version"), headers=headers,
                     deadline_s=VERSION_DEADLINE_S, max_bytes=VERSION_MAX_BYTES)
        version = reply.json().get("version") if reply.status == 200 else None
    except (HTTPCallError, ValueError, AttributeError):
        return None
    if not isinstance(version, str) or not version.isprintable() or len(version) > 64:
        return None
    return version


def environment_of(loaded: LoadedRecipe, target: Target) -> dict:
    """The environment of the measurement: this machine's for a launch; a server's own
    vLLM version (when it reports one) for a URL, whose hardware mopt cannot see."""
    if target.url is None:
        return environment_here(loaded.resolved, loaded.base_dir)
    from model_optimizer.load.workload import api_headers

    headers = api_headers(loaded.resolved["workload"], target.url)
    return {"vllm": server_version(target.url, headers), "hardware": None, "driver": None,
            "checkpoint": None}


# ----- the verification ----------------------------------------------------------------------
def _open_archive(loaded: LoadedRecipe, runs_base: Path, validation: Validation,
                  environment: dict, target: Target, extra: dict) -> RunArchive:
    def start(archive: RunArchive) -> None:
        resolved = loaded.resolved
        created_at = utc_now()
        archive.write_json(RUN_FILE, {
            "id": archive.id, "created_at": created_at, "kind": KIND,
            "recipe_file": str(loaded.path or ""), "recipe_name": loaded.name,
            "recipe_revision": resolved["revision"], "overrides": list(loaded.overrides),
            "validated_run_id": validation.run_id, "validation": validation.to_dict(),
            "url": redact_url(target.url) if target.url else None,
            "environment": environment, **extra})
        archive.write_text(GIVEN_RECIPE, loaded.source_text)
        archive.write_entry(created_at=created_at, recipe_name=loaded.name,
                            recipe_revision=resolved["revision"],
                            recipe_file=str(loaded.path or ""),
                            recipe_hash=config_hash(resolved),
                            vllm_version=environment.get("vllm"),
                            hardware=environment.get("hardware"))
    return RunArchive.create(runs_base, f"{loaded.name}-verify", kind=KIND, start=start)


def _measure(loaded: LoadedRecipe, steps: Path, validation: Validation, target: Target,
             on_event: EventCallback | None, extra: dict, engine_factory) -> RunOutcome:
    if target.url is None:
        return run_recipe(loaded, steps, on_event=on_event,
                          workload_override=validation.workload, archive_extra=extra,
                          engine_factory=engine_factory)
    return bench_endpoint(target.url, loaded, target.model_name or loaded.spec.model.served_name,
                          target.tokenizer_dir or "", steps, on_event=on_event,
                          archive_extra=extra, workload_override=validation.workload)


def verify(loaded: LoadedRecipe, runs_base: str | Path, *, target: Target | None = None,
           on_event: EventCallback | None = None, archive_extra: dict | None = None,
           engine_factory=None) -> VerifyResult:
    """Measure ``loaded``'s validated revision again and judge it (archived under
    ``runs_base``); KeyboardInterrupt after archiving the verification as interrupted."""
    target = target or Target()
    runs_base = Path(runs_base)
    validated = loaded.resolved.get("validated")
    if not validated:
        raise UsageError(f"{loaded.path}: revision {loaded.resolved['revision']} has no "
                         "validated block, so there are no figures to verify against; `mopt "
                         "sweep` measures it and writes a validated revision")
    validation = validating_measurement(validated, runs_base)
    if validation.reference is None and not validation.evidence.metrics:
        raise UsageError(f"{loaded.path}: the validated block has no figures and "
                         f"{validation.run_id} is not under {runs_base}: nothing to verify "
                         "against; give the runs dir it was validated in (--runs-dir)")
    environment = environment_of(loaded, target)
    extra = dict(archive_extra or {})
    archive = _open_archive(loaded, runs_base, validation, environment, target, extra)
    try:
        outcome = _measure(loaded, archive.path / STEPS_DIR, validation, target, on_event,
                           {**extra, "verifies": archive.id}, engine_factory)
    except KeyboardInterrupt:
        archive.set_status(STATUS_INTERRUPTED, phase="finished", finished_at=utc_now())
        archive.close()
        raise
    except BaseException as exc:
        archive.set_status(failed_status("internal_error"), phase="finished",
                           finished_at=utc_now(), error=str(exc)[:2000])
        archive.close()
        raise
    verdict = judge(validation.evidence, measured_evidence(outcome),
                    validation.archived_cv) if outcome.ok else None
    result = VerifyResult(str(loaded.path or ""), loaded.name, loaded.resolved["revision"],
                          validation, environment, outcome, verdict, archive.path)
    result.next = next_steps(result, loaded, runs_base)
    _finish(archive, result)
    return result


def measured_evidence(outcome: RunOutcome) -> Evidence:
    """The measured run's figures and requests, from its (verified) archive."""
    view = archives.open_archive(Path(outcome.archive))
    return Evidence(view.json(METRICS_FILE) or dict(outcome.metrics), view.requests(),
                    str(outcome.archive))


def _finish(archive: RunArchive, result: VerifyResult) -> None:
    archive.write_json(VERDICT_FILE, result.to_dict())
    archive.write_text(REPORT_FILE, "\n".join(["# Verification", "", *report_lines(result)])
                       + "\n")
    archive.write_entry(**metric_fields(result.outcome.metrics))
    status = ("ok" if result.holds else result.outcome.status if not result.outcome.ok
              else CLIENT_BOUND_STATUS if result.client_bound
              else REGRESSED_STATUS if result.verdict and result.verdict.regressed
              else failed_status("not_judged"))
    archive.set_status(status, phase="finished", finished_at=utc_now(),
                       verdict=result.word)
    archive.close()


# ----- what to run next ----------------------------------------------------------------------
def next_steps(result: VerifyResult, loaded: LoadedRecipe, runs_base: Path) -> list[dict]:
    """After a regression: a rollback to a revision verified to hold in this environment,
    a sweep, a tune (when the recipe has a tune section); after a failed run: its archive."""
    recipe = result.recipe_file
    if not result.outcome.ok:
        return [{"command": f"mopt runs show {result.outcome.run_id}",
                 "why": f"the measurement ended {result.outcome.status}"}]
    if result.holds:
        return []
    if result.client_bound:
        return client_bound_steps(result)
    steps = []
    held = _held_before(loaded, runs_base, result.environment)
    if held is not None:
        steps.append({"command": f"mopt rollback {held.validated_run_id} --recipe {recipe}",
                      "why": f"revision {held.revision} {held.line()}"})
    steps.append({"command": f"mopt sweep {recipe}",
                  "why": "re-validate here: the sweep measures "
                         f"{loaded.resolved['sweep']['param']} again and writes a validated "
                         "revision"})
    if (loaded.resolved.get("tune") or {}).get("params"):
        steps.append({"command": f"mopt tune {recipe}",
                      "why": "search the knobs of its tune section together, here"})
    return steps


def client_bound_steps(result: VerifyResult) -> list[dict]:
    """What makes the engine, not the load client, set the pace of the next verification."""
    recipe = result.recipe_file
    load = (result.outcome.metrics.get("load_average") or {}).get("before")
    busy = f"; the load average was {load:.2f} before the window" if load is not None else ""
    return [
        {"command": f"mopt verify {recipe} --url http://<server>:<port>",
         "why": "run from another host: the client no longer shares the engine's machine"},
        {"command": f"mopt verify {recipe} --set 'hardware.placement={{engine: [0], "
                    "server: [1], client: [2]}}'",
         "why": "or here with the client on cores of its own (your core ids; "
                f"docs/reference.md, hardware.placement), on a quiet machine{busy}"},
        {"command": f"mopt sweep {recipe}",
         "why": "or re-validate with fewer in flight: one client cannot keep the engine "
                "fed at the validated concurrency, and verify measures that workload as it "
                "was"}]


def _held_before(loaded: LoadedRecipe, runs_base: Path, environment: dict):
    """The newest verification that held, in this environment, of an earlier revision of
    the same recipe file."""
    for record in verifications(runs_base, loaded.name):
        if (record.holds and record.validated_run_id and record.revision is not None
                and record.revision < loaded.resolved["revision"]
                and record.environment == environment):
            return record
    return None


# ----- words -----------------------------------------------------------------------------------
def _side(value: float | None, half_width: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    text = f"{value:,.2f}"
    return text + (f" ± {half_width:,.2f}" if half_width is not None else "")


def report_lines(result: VerifyResult) -> list[str]:
    """The verification for people: what was compared, the figures side by side with their
    intervals and noise, the verdict, what to run next."""
    validation = result.validation
    lines = [f"{result.recipe_file}: {result.name} revision {result.revision}, validated by "
             f"{validation.run_id} on vLLM {validation.vllm_version or '-'} "
             f"({validation.hardware or '-'})",
             f"measured now: {result.outcome.run_id} on "
             f"{describe_environment(result.environment)}"]
    if validation.note:
        lines.append(f"note: {validation.note}")
    if result.verdict is not None:
        lines += ["", f"  {'figure':<13} {'validated (95%)':>20} {'now (95%)':>20} "
                  f"{'change':>8} {'noise':>6}  verdict"]
        for check in result.verdict.checks:
            change = "-" if check.change is None else f"{check.change:+.1%}"
            noise = "-" if check.noise is None else f"{check.noise:.0%}"
            lines.append(f"  {check.metric:<13} "
                         f"{_side(check.validated, check.validated_half_width):>20} "
                         f"{_side(check.measured, check.measured_half_width):>20} "
                         f"{change:>8} {noise:>6}  {check.verdict}"
                         + (f" ({check.note})" if check.note else ""))
        lines += ["", "A figure regressed when it is worse than validated by more than the "
                  "noise: the largest of both runs' 95% intervals combined (for a latency "
                  "also their throughput's), the validating search's run-to-run noise, the "
                  "10% minimum effect and either run's drift between its halves "
                  "(docs/production.md)."]
    if result.verdict is not None and result.verdict.clocks is not None:
        lines += ["", f"clocks: {result.verdict.clocks.text}"
                  + ("" if result.verdict.clocks.same else
                     " (the verdict stands; a card at another clock explains a change as well "
                     "as the recipe does: docs/production.md)")]
    lines += ["", verdict_line(result)]
    lines += [f"next: {step['command']}  # {step['why']}" for step in result.next]
    return lines


def verdict_line(result: VerifyResult) -> str:
    """``HOLDS: ...``, ``REGRESSED: qps 14.2 ± 1.1 -> 3.1 ± 0.4 (-78%; noise 23%, ...)``;
    ``; taken at different clocks: SM 1980 vs 1755 MHz`` after it when they differ."""
    note = result.verdict.clock_note if result.verdict is not None else None
    return _verdict_words(result) + (f"; {note}" if note and result.outcome.ok else "")


def _verdict_words(result: VerifyResult) -> str:
    where = describe_environment(result.environment)
    if not result.outcome.ok:
        return (f"NOT VERIFIED: the measurement ended {result.outcome.status} "
                f"({result.outcome.failure.hint if result.outcome.failure else 'no figures'})")
    if result.holds:
        return f"HOLDS: revision {result.revision} verified on {where}"
    if result.verdict is None or not result.verdict.regressed:
        return (f"NOT JUDGED: {result.verdict.reason if result.verdict else 'no figures'}"
                + (": the load client, not the engine, set the pace of this window, so its "
                   "figures are no evidence of a regression or of a hold"
                   if result.client_bound else ""))
    return (f"REGRESSED on {where}: "
            + "; ".join(check.describe() for check in result.verdict.regressed))
