"""`mopt optimize MODEL_DIR|RECIPE`: baseline, candidates, quality gate, sweep, revision."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from model_optimizer.archive import runs_dir
from model_optimizer.cli.common import (
    JsonOption,
    NoQualityGateOption,
    RunsDirOption,
    SetOption,
    handle_errors,
    progress_console,
)
from model_optimizer.cli.outcomes import print_notice
from model_optimizer.cli.progress import SearchProgress, run_search, steps_text
from model_optimizer.events import (
    Event,
    QuantizeStage,
    QuantizeStarted,
    StageDone,
    StageSkipped,
    StageStarted,
)
from model_optimizer.usecase.optimize import OPTIMIZE_FILES
from model_optimizer.usecase.optimize import optimize as run_optimize


class OptimizeProgress(SearchProgress):
    """Search progress plus the pipeline's stages."""

    noun = "optimize"

    def handlers(self) -> dict[type[Event], Callable[[Any], None]]:
        """The pipeline's events: each stage, skipped or done, and the quantizer's steps."""
        return {StageStarted: self._on_stage, StageSkipped: self._on_stage_skipped,
                StageDone: self._on_stage_done, QuantizeStarted: self._on_start,
                QuantizeStage: self._on_quantize_stage}

    def _on_stage(self, event: StageStarted) -> None:
        self._log(f"stage {event.stage}{steps_text(event.done, event.total, event.eta_s)}")

    def _on_stage_skipped(self, event: StageSkipped) -> None:
        self._log(f"stage {event.stage}: already {event.status} (resumed)")

    def _on_stage_done(self, event: StageDone) -> None:
        record = event.record
        qps = (record.get("figures") or {}).get("qps")
        extra = f", {qps:.1f} req/s" if isinstance(qps, int | float) else ""
        why = f" ({record['reason']})" if record.get("reason") else ""
        self._log(f"  -> {record.get('status')}{why}{extra} in {record.get('seconds')} s")

    def _on_start(self, event: QuantizeStarted) -> None:
        self._log(f"  quantizing {event.scheme} ({event.calibration})")

    def _on_quantize_stage(self, event: QuantizeStage) -> None:
        self._log(f"    {event.text}")


@handle_errors
def optimize(
    target: Annotated[Path | None, typer.Argument(
        help="A model folder (a recipe is written first, as `mopt init` does) or a recipe.",
        show_default=False, metavar="MODEL_DIR|RECIPE")] = None,
    output: Annotated[Path | None, typer.Option(help="Write the validated revision here "
                      "instead of over the recipe.")] = None,
    resume: Annotated[Path | None, typer.Option(help="Continue the interrupted pipeline in "
                      "this runs/ folder.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace existing quantized "
                     "checkpoint folders.")] = False,
    overrides: SetOption = None,
    runs_dir_opt: RunsDirOption = None,
    no_quality_gate: NoQualityGateOption = False,
    as_json: JsonOption = False,
) -> None:
    """Baseline run, then each optimize.candidates entry (quantized with llm-compressor
    and/or a compact KV cache) measured and gated on quality against the baseline, then a
    max_num_seqs sweep on the survivor, written as a validated recipe revision that pins
    its checkpoint (quantized or not). Every stage is an archived run linked from the
    pipeline's archive (report.md with the before/after table, summary.csv, plot.png).

    The quality gate is on by default (`mopt init` writes one): each candidate is evaluated
    on its measurement's server against the baseline's answers. A recipe that cannot gate
    is refused unless --no-quality-gate, which the report and the revision record in bold.

    Exit codes: 0 a revision was written; 2 bad input; 4 nothing ran well enough; 130
    interrupted (continue with --resume).
    """
    progress = OptimizeProgress(progress_console(as_json))
    run_search(lambda: run_optimize(target, overrides=overrides, output=output, resume=resume,
                                    force=force, no_quality_gate=no_quality_gate,
                                    runs_base=runs_dir(runs_dir_opt), on_event=progress,
                                    on_notice=print_notice),
               progress, "optimize", OPTIMIZE_FILES, as_json)
