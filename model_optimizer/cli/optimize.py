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
    console,
    err_console,
    handle_errors,
    progress_console,
)
from model_optimizer.cli.progress import SearchProgress, run_search, steps_text
from model_optimizer.errors import UsageError
from model_optimizer.events import (
    Event,
    QuantizeStage,
    QuantizeStarted,
    StageDone,
    StageSkipped,
    StageStarted,
)
from model_optimizer.recipe import load_recipe


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


def _recipe_for(target: Path, output: Path | None) -> Path:
    """A recipe file: TARGET itself, or one `mopt init` writes for a model folder."""
    if not target.is_dir():
        return target
    from model_optimizer.fsutil import atomic_write_text
    from model_optimizer.onboard.detect import seen_hardware
    from model_optimizer.onboard.init import WorkloadChoice, build_init_recipe
    from model_optimizer.onboard.quality import write_quality_files

    recipe = output or Path("recipes") / f"{target.resolve().name}.yaml"
    if recipe.exists():
        raise UsageError(f"{recipe}: exists; optimize it with `mopt optimize {recipe}`, or "
                         "pass --output for a new file")
    result = build_init_recipe(target, recipe, seen_hardware(), WorkloadChoice())
    recipe.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(recipe, result.text)
    write_quality_files(result.files, recipe)
    console.print(f"wrote {recipe} with `mopt init` (plan: {result.plan_verdict})",
                  highlight=False)
    return recipe


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
    from model_optimizer.signals import terminate_as_interrupt

    terminate_as_interrupt()
    progress = OptimizeProgress(progress_console(as_json))
    run_search(lambda: _run(target, resume, output, force, overrides, runs_dir_opt, progress,
                            no_quality_gate),
               progress, "optimize", "report.md, summary.csv, plot.png", as_json)


def _run(target, resume, output, force, overrides, runs_dir_opt, progress,
         no_quality_gate=False):
    from model_optimizer.optimize.pipeline import resume_optimize, start_optimize

    if resume is not None:
        if target is not None or overrides:
            raise UsageError("--resume continues a pipeline with its archived recipe; give "
                             "no MODEL_DIR|RECIPE or --set with it")
        return resume_optimize(resume, on_event=progress)
    if target is None:
        raise UsageError("give a MODEL_DIR or RECIPE to optimize, or --resume runs/<id>")
    from model_optimizer.cli.current import check_before_launch

    recipe = _recipe_for(target, output)
    loaded = load_recipe(recipe, overrides)
    check_before_launch(loaded, False, err_console)  # preflight: exit 2 before any launch
    return start_optimize(loaded, runs_dir(runs_dir_opt), output=output, force=force,
                          no_quality_gate=no_quality_gate, on_event=progress)

