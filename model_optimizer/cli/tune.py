"""`mopt tune`: search several engine knobs at once with optuna under the recipe's SLOs; one
machine, or several workers on one study in PostgreSQL; write the best feasible revision."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from model_optimizer.archive import runs_dir
from model_optimizer.archive.report import fmt
from model_optimizer.cli.common import (
    JsonOption,
    ModelConfigOption,
    NoQualityGateOption,
    RevisionOutputOption,
    RunsDirOption,
    SetOption,
    err_console,
    handle_errors,
    progress_console,
)
from model_optimizer.cli.completion import complete_search
from model_optimizer.cli.current import ForceOption, OptionalRecipeArg, SearchArgs, load_chosen
from model_optimizer.cli.outcomes import print_notice
from model_optimizer.cli.progress import SearchProgress, eta_text, run_search
from model_optimizer.events import (
    ArchiveOpened,
    Event,
    LevelDone,
    ScanFailed,
    TuneConfirm,
    TuneConfirmed,
    TuneFinished,
    TuneScan,
    TuneSeeded,
    TuneTrial,
    TuneTrialDone,
)
from model_optimizer.usecase.tune import TUNE_FILES
from model_optimizer.usecase.tune import tune as run_tune

if TYPE_CHECKING:
    from model_optimizer.search.tune.loop import TuneOutcome
    from model_optimizer.search.tune.space import TuneFlags

STORAGE_ENV = "MOPT_TUNE_STORAGE"


class TuneProgress(SearchProgress):
    """Search progress plus the tune's own events: which trial, which configuration, verdict."""

    noun = "tune"

    def handlers(self) -> dict[type[Event], Callable[[Any], None]]:
        """The tune's events: seeds enqueued, each trial and its verdict, the end."""
        return {TuneSeeded: self._on_seeded, TuneTrial: self._on_trial,
                TuneTrialDone: self._on_trial_done, TuneFinished: self._on_finished,
                TuneScan: self._on_scan, LevelDone: self._on_level_done,
                ScanFailed: self._on_scan_failed, TuneConfirm: self._on_confirm,
                TuneConfirmed: self._on_confirmed}

    def _announce(self, event: ArchiveOpened) -> None:
        super()._announce(event)
        self._log(f"study: {event.study} in {event.storage}")
        if event.strategy:
            self._log(f"strategy: {event.strategy}")

    def _on_scan(self, event: TuneScan) -> None:
        self._log(f"  one server at max_num_seqs={event.max_num_seqs}, levels {event.levels}")

    def _on_level_done(self, event: LevelDone) -> None:
        shown = (f"{fmt(event.objective, 2)}" if event.status == "ok"
                 else f"{event.status} ({event.failure})")
        self._log(f"    max_num_seqs {event.max_num_seqs}: {shown}")

    def _on_scan_failed(self, event: ScanFailed) -> None:
        then = ("the scan ceiling is lowered for these knobs" if event.memory
                else "this trial launches its own configuration")
        self._log(f"  the scan server at max_num_seqs={event.max_num_seqs} did not start "
                  f"({event.failure}): {then}")

    def _on_confirm(self, event: TuneConfirm) -> None:
        self._log(f"confirming trial {event.number} {event.params} with a launch of its own")

    def _on_confirmed(self, event: TuneConfirmed) -> None:
        verdict = "confirmed" if event.ok else "rejected: " + "; ".join(event.problems)
        own = event.objective or {}
        if own.get("value") is not None:
            half = own.get("half_width")
            shown = fmt(own["value"], 2) + (f" ± {fmt(half, 2)}" if half is not None else "")
            verdict += f" ({shown} by its own launch)"
        self._log(f"  -> {verdict}")

    def _on_seeded(self, event: TuneSeeded) -> None:
        self._log(f"enqueued {event.count} trial(s) first: " + "; ".join(
            f"{s['seed']} {s['params']}" for s in event.seeds))

    def _on_trial(self, event: TuneTrial) -> None:
        seed = f", seed: {event.seed}" if event.seed else ""
        self._log(f"trial {event.number} ({event.finished} of {event.budget} finished"
                  f"{eta_text(event.eta_s)}{seed}): {event.params}")

    def _on_trial_done(self, event: TuneTrialDone) -> None:
        data = event.record
        if data.get("duplicate_of") is not None:
            self._log(f"  -> same configuration as trial {data['duplicate_of']}: result "
                      "copied, nothing launched")
            return
        status = data["status"]
        if status == "skipped":
            self._log(f"  -> pruned without a launch ({data['failure_kind']}): {data['reason']}")
        elif status == "failed":
            self._log(f"  -> failed ({data['failure_kind']}), infeasible: {data['reason']}")
        else:
            verdict = "feasible" if data["feasible"] else "infeasible (SLO)"
            self._log(f"  -> objective {fmt(data['values'][0], 2)}, {verdict}")

    def _on_finished(self, event: TuneFinished) -> None:
        return


@handle_errors
def tune(
    recipe: OptionalRecipeArg = None,
    n_trials: Annotated[int | None, typer.Option(
        "--n-trials", min=1, help="Trial budget of the study, all workers together (default: "
        "the recipe's tune.n_trials); when scanning, each trial is at most one launch.")] = None,
    max_minutes: Annotated[float | None, typer.Option(
        "--max-minutes", help="This worker starts no trial after this many minutes.")] = None,
    sampler: Annotated[str | None, typer.Option(help="tpe, random or grid (default: the "
                                                "recipe's tune.sampler).")] = None,
    seed: Annotated[int | None, typer.Option(help="Sampler seed.")] = None,
    storage: Annotated[str | None, typer.Option(
        envvar=STORAGE_ENV, show_envvar=True,
        help="Study storage shared by workers, e.g. postgresql://user:pass@host/db (default: "
             "SQLite inside the tune archive).")] = None,
    study_name: Annotated[str | None, typer.Option(
        "--study-name", help="Name of the shared study (the same on every worker).")] = None,
    output: RevisionOutputOption = None,
    model_config: ModelConfigOption = None,
    scan: Annotated[bool | None, typer.Option(
        "--scan/--no-scan", help="With max_num_seqs in tune.params: each trial launches the "
        "other knobs once at the largest max_num_seqs that fits and measures every "
        "max_num_seqs level of the space on it (each level a trial of that launch; the budget "
        "counts launches), then confirms the best with a launch of its own. Needs a "
        "closed-loop workload (workload.concurrency null, request_rate inf). --no-scan: one "
        "launch per trial. Default: the recipe's tune.strategy (auto: scan where valid).")]
    = None,
    resume: Annotated[Path | None, typer.Option(help="Continue the tune in this runs/ folder "
                                                "(with --n-trials: extend it).",
                                                autocompletion=complete_search)] = None,
    overrides: SetOption = None,
    runs_dir_opt: RunsDirOption = None,
    force: ForceOption = False,
    no_quality_gate: NoQualityGateOption = False,
    as_json: JsonOption = False,
) -> None:
    """Tune several engine knobs at once (the recipe's tune.params) with optuna: maximize the
    objective with the SLOs as constraints, prune what the planner rules out, keep failed
    launches as infeasible trials, and write the best feasible trial as a new revision.

    With max_num_seqs in the space and a closed-loop workload, each trial is one launch that
    scans max_num_seqs (see --scan); the best is confirmed by a launch of its own before the
    revision is written.

    Workers: run the same command with --storage postgresql://... --study-name NAME on
    several machines; they share the budget and each archives the trials it ran.

    Without RECIPE, tunes the current recipe (see `mopt status`). A preflight checks in
    seconds what would make the launches fail before the first one. A knob that changes the
    model's answers (kv_cache_dtype) needs the recipe's quality gate, or --no-quality-gate.

    Exit codes: 0 a revision was written (or other workers still run: the last one writes
    it); 2 bad input or a preflight refusal; 4 no feasible trial; 130 interrupted (continue
    with --resume).
    """
    from model_optimizer.search.tune.space import TuneFlags  # the tune package loads optuna

    progress = TuneProgress(progress_console(as_json))
    args = SearchArgs(recipe=recipe, resume=resume, overrides=overrides,
                      runs_dir=runs_dir_opt, output=output, model_config=model_config,
                      force=force, no_quality_gate=no_quality_gate)
    flags = TuneFlags(n_trials=n_trials, max_minutes=max_minutes, sampler=sampler, seed=seed,
                      strategy=None if scan is None else ("scan" if scan else "relaunch"))
    run_search(lambda: _run(args, flags, storage, study_name, progress), progress, "tune",
               TUNE_FILES, as_json)


def _run(args: SearchArgs, flags: TuneFlags, storage: str | None, study_name: str | None,
         progress: TuneProgress) -> TuneOutcome:
    if args.resume is not None:  # the use case refuses a RECIPE, --set or settings beside it
        return run_tune(args.recipe, flags, overrides=args.overrides, storage=storage,
                        force=args.force, resume=args.resume, on_event=progress,
                        on_notice=print_notice)
    loaded = load_chosen(args.recipe, args.overrides, "tune",
                         progress.console is err_console, args.runs_dir)
    return run_tune(loaded, flags, runs_base=runs_dir(args.runs_dir), storage=storage,
                    study_name=study_name, output=args.output,
                    model_config=args.model_config, force=args.force,
                    no_quality_gate=args.no_quality_gate, on_event=progress,
                    on_notice=print_notice)
