"""One eval of one deployment: launch the recipe's server (or use a running one), generate on
the eval set with the recorded sampling, score answers teacher-forced, run lm-eval tasks,
compare with a baseline when one is given, and archive everything as an ``eval`` run.

The server is always stopped (also on Ctrl-C, with interrupts deferred during cleanup) and
the archive always finished with its status, as ``apply`` does.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from model_optimizer.archive import STATUS_INTERRUPTED, STATUS_OK, RunArchive, failed_status
from model_optimizer.archive import utc_now as _utc_now
from model_optimizer.archive.names import ENGINE_LOG, FAILURE_FILE, REPORT_FILE, SERVER_FILE
from model_optimizer.archive.start import scrub_log, write_start
from model_optimizer.engine import EngineProcess, EngineStartError
from model_optimizer.engine.factory import plan_server
from model_optimizer.errors import UsageError
from model_optimizer.events import (
    ArchiveOpened,
    Done,
    EventCallback,
    Generated,
    LmEval,
    Ready,
    Scoring,
    Starting,
    Stopping,
    Waiting,
    quiet,
)
from model_optimizer.quality import result as files
from model_optimizer.quality.client import generate, score_sequences
from model_optimizer.quality.compare import Comparison, compare_evals
from model_optimizer.quality.config import QualityConfig
from model_optimizer.quality.evalset import load_eval_set
from model_optimizer.quality.gate import GateResult, judge
from model_optimizer.quality.lmeval import LmEvalError, lm_eval_available, run_lm_eval
from model_optimizer.quality.report import render_eval_report
from model_optimizer.quality.result import EvalResult
from model_optimizer.reaper import reap_abandoned
from model_optimizer.recipe import LoadedRecipe
from model_optimizer.recipe.render import model_location
from model_optimizer.runner import check_model_present
from model_optimizer.secrets import redact_argv, redact_env, secret_values
from model_optimizer.signals import interrupts_deferred


class EvalRequestsFailed(Exception):
    """Some eval requests failed: the eval cannot be compared."""


@dataclass
class Endpoint:
    """A served model to evaluate."""

    base_url: str
    model: str
    tokenizer_dir: str
    ready_after_s: float | None = None
    engine: EngineProcess | None = None   # when mopt launched it

    def died(self):
        """The classified failure of a launched server that died, else None."""
        return self.engine.runtime_failure() if self.engine is not None else None

    def log_errors(self, count: int = 4) -> str:
        """The last error lines of a launched server's log, as a suffix for a message."""
        if self.engine is None:
            return ""
        lines = [line.strip() for line in self.engine.log_text().splitlines()
                 if "Error" in line or "error" in line]
        return ("; server log: " + " | ".join(lines[-count:])) if lines else ""


@dataclass
class EvalOutcome:
    """An eval, and (with a baseline) its comparison and gate verdict."""

    result: EvalResult
    comparison: Comparison | None = None
    gate: GateResult | None = None

    def to_dict(self) -> dict:
        """JSON-ready summary (``mopt eval --json``)."""
        return {"run_id": self.result.run_id, "archive": str(self.result.archive),
                "status": self.result.status, "failure": self.result.failure,
                "figures": self.result.figures(), "timings_s": self.result.timings_s,
                "comparison": self.comparison.to_dict() if self.comparison else None,
                "gate": self.gate.to_dict() if self.gate else None}


@contextlib.contextmanager
def serve(loaded: LoadedRecipe, archive: RunArchive, emit: EventCallback
          ) -> Iterator[Endpoint]:
    """Launch the recipe's vLLM server, yield its endpoint once healthy, always stop it.

    Raises EngineStartError (classified, written to ``failure.json``) when it cannot start.
    """
    recipe = loaded.resolved
    location = check_model_present(loaded)
    plan = plan_server(loaded)  # the engine factory's port, argv, environment and URL
    archive.write_json(SERVER_FILE, {"argv": redact_argv(plan.command.argv),
                                     "env": redact_env(plan.command.env)})
    base_url = plan.base_url
    engine = plan.process(archive.file(ENGINE_LOG))
    try:
        emit(Starting(engine.argv))
        engine.start()
        archive.set_status("running", phase="starting", server_pid=engine.pid)
        ready = engine.wait_ready(on_tick=lambda s: emit(Waiting(s)))
        emit(Ready(ready))
        yield Endpoint(base_url, recipe["model"]["served_name"],
                       recipe["model"].get("tokenizer") or location, ready, engine)
    finally:
        with interrupts_deferred():
            emit(Stopping())
            engine.stop()
            scrub_log(archive.file(ENGINE_LOG), secret_values(engine.argv, engine.env_extra))


def _generate_all(endpoint: Endpoint, config: QualityConfig, result: EvalResult,
                  archive: RunArchive, emit: EventCallback) -> None:
    total = len(result.items) * config.repeats
    for repeat in range(config.repeats):
        seed = config.sampling.seed + repeat
        gens = generate(endpoint.base_url, endpoint.model, result.items, config.sampling,
                        seed=seed, concurrency=config.concurrency,
                        timeout_s=config.request_timeout_s,
                        on_done=lambda n, r=repeat: emit(Generated(
                            r * len(result.items) + n, total)))
        for generation in gens:
            archive.append_jsonl(files.OUTPUTS, {"repeat": repeat, **generation.to_dict()})
        result.generations.append(gens)


def _score(endpoint: Endpoint, config: QualityConfig, result: EvalResult,
           reference: EvalResult | None, archive: RunArchive, emit: EventCallback) -> None:
    k = max(1, config.sampling.logprobs)
    kwargs = {"concurrency": config.concurrency, "timeout_s": config.request_timeout_s}
    emit(Scoring("own answers"))
    result.scores = score_sequences(endpoint.base_url, endpoint.model, result.generations[0],
                                    k, **kwargs)
    for scored in result.scores:
        archive.append_jsonl(files.SCORES, scored.to_dict())
    if reference is not None and reference.generations:
        emit(Scoring(f"baseline {reference.run_id}"))
        result.baseline_scores = score_sequences(endpoint.base_url, endpoint.model,
                                                 reference.generations[0], k, **kwargs)
        for scored in result.baseline_scores:
            archive.append_jsonl(files.SCORES_BASELINE, scored.to_dict())


def evaluate_endpoint(endpoint: Endpoint, config: QualityConfig, result: EvalResult,
                      archive: RunArchive, reference: EvalResult | None,
                      emit: EventCallback) -> None:
    """Generate, score and run lm-eval against a healthy endpoint, filling ``result``."""
    if result.items:
        archive.write_text(files.EVALSET,
                           "".join(json.dumps(i.to_dict()) + "\n" for i in result.items))
        started = time.monotonic()
        _generate_all(endpoint, config, result, archive, emit)
        result.timings_s["generate"] = time.monotonic() - started
        failed = [g for repeat in result.generations for g in repeat if not g.ok]
        died = endpoint.died() if failed else None
        if died is not None:
            archive.write_json(FAILURE_FILE, died.to_dict())
            raise EvalRequestsFailed(f"the server died during the eval ({died.kind}): "
                                     f"{died.hint}; " + " | ".join(died.evidence[:4]))
        if failed:
            raise EvalRequestsFailed(f"{len(failed)} of {len(result.items) * config.repeats} "
                                     f"requests failed; first: {failed[0].error}"
                                     + endpoint.log_errors())
        started = time.monotonic()
        _score(endpoint, config, result, reference, archive, emit)
        result.timings_s["score"] = time.monotonic() - started
    if config.lm_eval.tasks:
        emit(LmEval(list(config.lm_eval.tasks)))
        started = time.monotonic()
        result.lm_eval = run_lm_eval(endpoint.base_url, endpoint.model, endpoint.tokenizer_dir,
                                     config.lm_eval, archive.file(files.LM_EVAL_DIR),
                                     seed=config.sampling.seed)
        result.timings_s["lm_eval"] = time.monotonic() - started


def _finish(archive: RunArchive, loaded: LoadedRecipe | None, outcome: EvalOutcome,
            reference: EvalResult | None, config: QualityConfig) -> None:
    result = outcome.result
    if reference is not None and result.ok:
        outcome.comparison = compare_evals(reference, result)
        for prompt in outcome.comparison.prompts:
            archive.append_jsonl(files.FIDELITY, prompt.to_dict())
    if reference is not None:
        outcome.gate = judge(outcome.comparison, config.thresholds,
                             None if result.ok else result.failure or result.status)
    archive.write_json(files.QUALITY, {
        "sampling": config.sampling.to_dict(), "config": config.to_dict(),
        "baseline_run": reference.run_id if reference else None,
        "figures": result.figures(), "timings_s": result.timings_s,
        "lm_eval_scores": [s.to_dict() for s in result.lm_eval],
        "comparison": outcome.comparison.to_dict() if outcome.comparison else None,
        "gate": outcome.gate.to_dict() if outcome.gate else None, "failure": result.failure})
    archive.write_text(REPORT_FILE, render_eval_report(outcome, loaded))


def run_eval(loaded: LoadedRecipe | None, config: QualityConfig, runs_base: str | Path, *,
             reference: EvalResult | None = None, url: str | None = None,
             model: str | None = None, tokenizer_dir: str | None = None,
             on_event: EventCallback | None = None, name: str | None = None) -> EvalOutcome:
    """Evaluate ``loaded`` (launching it) or the server at ``url``; archive as kind ``eval``.

    With ``reference`` (a baseline's EvalResult) the candidate also scores the baseline's
    answers and the outcome carries the comparison and the gate verdict.
    """
    emit = on_event or quiet
    label = name or (loaded.name if loaded else "eval")
    items = load_eval_set(config.eval_set) if config.eval_set else []
    if config.lm_eval.tasks and not lm_eval_available():
        raise UsageError("quality.lm_eval needs lm-eval: pip install 'lm-eval[api]' (the "
                         "[quality] extra installs it)")
    if url is None and loaded is None:
        raise UsageError("an eval needs a recipe to launch or a --url")
    reap_abandoned(runs_base)
    archive = RunArchive.create(runs_base, label, kind="eval", start=lambda new: write_start(
        new, loaded, {"kind": "eval", "quality": config.to_dict(), "url": url,
                      "baseline_run": reference.run_id if reference else None},
        verb="evaluated"))
    result = EvalResult(archive.id, archive.path, STATUS_INTERRUPTED, config, items)
    outcome = EvalOutcome(result)
    emit(ArchiveOpened(archive.id, str(archive.path)))
    started = time.monotonic()
    try:
        if url is not None:
            endpoint = Endpoint(url.rstrip("/"), model or (loaded.resolved["model"][
                "served_name"] if loaded else "default"), tokenizer_dir or (
                model_location(loaded.resolved, loaded.base_dir) if loaded else ""))
            archive.set_status("running", phase="eval")
            evaluate_endpoint(endpoint, config, result, archive, reference, emit)
        else:
            with serve(loaded, archive, emit) as endpoint:
                result.timings_s["launch"] = endpoint.ready_after_s
                archive.set_status("running", phase="eval")
                evaluate_endpoint(endpoint, config, result, archive, reference, emit)
        result.status = STATUS_OK
    except EngineStartError as exc:
        result.status = failed_status(exc.failure.kind)
        result.failure = exc.failure.hint
        archive.write_json(FAILURE_FILE, exc.failure.to_dict())
    except EvalRequestsFailed as exc:
        result.status = failed_status("requests")
        result.failure = str(exc)
    except LmEvalError as exc:
        result.status = failed_status("lm_eval")
        result.failure = str(exc)
    except Exception as exc:  # noqa: BLE001 - archived as a failure, never lost
        result.status = failed_status("internal")
        result.failure = f"{type(exc).__name__}: {exc}"
    finally:
        result.timings_s["total"] = time.monotonic() - started
        with interrupts_deferred():
            try:
                _finish(archive, loaded, outcome, reference, config)
            finally:
                archive.set_status(result.status, phase="finished", finished_at=_utc_now(),
                                   gate=outcome.gate.passed if outcome.gate else None)
                archive.close()
        emit(Done(outcome.to_dict()))
    return outcome
