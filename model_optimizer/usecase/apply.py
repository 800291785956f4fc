"""``mopt apply`` below the command line: drift, preflight, interrupts, the run, quality on
the same server, and the one exit code of them all.

    result = apply(Path("recipes/tiny-cpu.yaml"))
    result.outcome.metrics["qps"], result.exit_code
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from model_optimizer.archive import runs_dir
from model_optimizer.engine.factory import EngineFactory
from model_optimizer.errors import EXIT_SLO_FAILED, UsageError
from model_optimizer.events import EventCallback
from model_optimizer.fleet import LoadedFleet, load_fleet
from model_optimizer.fleet.run import run_fleet
from model_optimizer.recipe import LoadedRecipe, Overrides, load_recipe
from model_optimizer.runner import RunOutcome, run_recipe
from model_optimizer.signals import terminate_as_interrupt
from model_optimizer.usecase.notices import NoticeCallback, drift_of, preflight_of

if TYPE_CHECKING:
    from model_optimizer.quality.evaluate import EvalOutcome


@dataclass(frozen=True)
class ApplyResult:
    """One applied recipe: the run, the recipe's eval on its server (None without a quality
    section), and what drift and preflight said before the launch."""

    outcome: RunOutcome
    quality: EvalOutcome | None = None
    drift: list[str] = field(default_factory=list)
    preflight: list[str] = field(default_factory=list)

    @property
    def quality_failed(self) -> bool:
        """True when the eval failed or its gate did."""
        if self.quality is None:
            return False
        gate = self.quality.gate
        return not self.quality.result.ok or (gate is not None and not gate.passed)

    @property
    def exit_code(self) -> int:
        """The run's exit code; 4 (an SLO missed) for a run that met its SLOs but not its
        quality gate."""
        code = self.outcome.exit_code
        return EXIT_SLO_FAILED if code == 0 and self.quality_failed else code

    def to_dict(self) -> dict[str, Any]:
        """``mopt apply --json``: the run's summary with the eval's under ``quality``."""
        return {**self.outcome.to_dict(),
                "quality": self.quality.to_dict() if self.quality else None}


class _QualityOnServer:
    """The recipe's eval on the server the load test used (``run_recipe``'s
    ``while_serving``)."""

    def __init__(self, loaded: LoadedRecipe, runs_base: Path,
                 on_event: EventCallback | None):
        from model_optimizer.quality import quality_of

        self.loaded, self.runs_base, self.on_event = loaded, runs_base, on_event
        self.config = quality_of(loaded)
        self.outcome: EvalOutcome | None = None

    def __call__(self, base_url: str) -> None:
        from model_optimizer.quality import evaluate

        self.outcome = evaluate(self.loaded, config=self.config, url=base_url,
                                runs_base=self.runs_base, on_event=self.on_event)


def apply(recipe: Path | LoadedRecipe, *, overrides: Overrides | None = None,
          runs_base: Path | None = None, strict: bool = False, force: bool = False,
          on_event: EventCallback | None = None, on_notice: NoticeCallback | None = None,
          engine_factory: EngineFactory | None = None) -> ApplyResult:
    """Launch ``recipe`` (a file, with ``overrides``, or a loaded recipe), load-test it,
    archive the run under ``runs_base`` (default: ``runs_dir()``) and, with a quality
    section, evaluate on the same server.

    Before the launch: drift from the validated block (DriftError when ``strict``) and the
    preflight (PreflightError on a refusal unless ``force``), each message passed to
    ``on_notice``. SIGTERM, SIGHUP and SIGQUIT then end the run as Ctrl-C does.
    ``engine_factory``: the server process (default vLLM; the tests' mock)."""
    loaded = recipe if isinstance(recipe, LoadedRecipe) else load_recipe(recipe, overrides)
    base = runs_dir(runs_base)
    drift = drift_of(loaded, base, on_notice, strict=strict)
    warnings = preflight_of(loaded, base, on_notice, force=force)
    terminate_as_interrupt()
    quality = _QualityOnServer(loaded, base, on_event)
    outcome = run_recipe(loaded, base, on_event=on_event,
                         archive_extra={"drift": drift} if drift else None,
                         engine_factory=engine_factory,
                         while_serving=quality if quality.config.enabled else None)
    return ApplyResult(outcome, quality.outcome, drift, warnings)


def apply_fleet(fleet: Path | LoadedFleet, *, runs_base: Path | None = None,
                on_event: EventCallback | None = None) -> RunOutcome:
    """Launch ``fleet`` (a fleet file or a loaded one: its instances and router), load it
    through the router and archive the run; its exit code as `mopt apply`'s (4 also for a
    routing mismatch)."""
    fleet = fleet if isinstance(fleet, LoadedFleet) else load_fleet(fleet)
    terminate_as_interrupt()
    return run_fleet(fleet, runs_dir(runs_base), on_event=on_event)


def refuse_fleet_overrides(overrides: Overrides | None) -> None:
    """A fleet's instances are changed in the fleet file, not with --set."""
    if overrides:
        raise UsageError("--set is for recipes; change a fleet's instance with its set: list")
