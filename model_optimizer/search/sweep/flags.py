"""What a caller asks of a sweep beyond its recipe (``mopt sweep``'s flags, optimize's
``max_num_seqs`` sweep), and the sweep config they make with the recipe's sweep section."""

from __future__ import annotations

from dataclasses import dataclass

from model_optimizer.errors import UsageError
from model_optimizer.plan.accelerators import knob_multiple
from model_optimizer.recipe import RecipeSpec
from model_optimizer.recipe.render import Recipe
from model_optimizer.recipe.sweep_rules import NUMERIC_KNOBS, param_problem
from model_optimizer.search.sweep.strategy import SweepConfig


@dataclass(frozen=True)
class SweepFlags:
    """Each field None (``strict`` False) leaves the recipe's ``sweep`` section as it is."""

    param: str | None = None        # the engine knob
    start: float | None = None
    growth: float | None = None
    step: float | None = None
    max: float | None = None
    values: tuple | None = None     # a categorical knob's values, in order
    strategy: str | None = None     # auto | relaunch | probe-scan | probe-fit
    strict: bool = False            # write nothing when the choice is not resolved
    budget: float | None = None     # minutes (None: the recipe's sweep.budget)

    def config_keys(self) -> dict:
        """The sweep-section keys given (not None): those the config takes from the flags."""
        given = {"param": self.param, "start": self.start, "growth": self.growth,
                 "step": self.step, "max": self.max,
                 "values": None if self.values is None else list(self.values)}
        return {key: value for key, value in given.items() if value is not None}


def build_config(recipe: dict, flags: SweepFlags | None = None) -> SweepConfig:
    """SweepConfig from the recipe's sweep section, the flags given winning; the knob must be
    one mopt can sweep, with values (categorical) or a start (numeric) to begin from."""
    section = {**recipe["sweep"], **(flags or SweepFlags()).config_keys()}
    param = section["param"]
    problem = param_problem(param, section.get("values"))
    if problem is not None:
        raise UsageError(f"--param {param}: {problem}")
    if param in NUMERIC_KNOBS and not section.get("values") and section.get("start") is None:
        current = recipe["engine"].get(param)
        if current is None:
            raise UsageError(f"--param {param}: give --start (the recipe sets no {param} and "
                             "no sweep.start)")
        section["start"] = current
    return SweepConfig.from_recipe(
        section, multiple_of=knob_multiple(param, recipe["hardware"]["accelerator"]))


def sweep_objective(recipe: Recipe) -> str:
    """goodput with SLOs, else QPS; ``class:figure`` with ``sweep.objective_class``."""
    spec = RecipeSpec.of(recipe)
    base = "goodput_qps" if spec.slo.sets_any() else "qps"
    return f"{spec.sweep.objective_class}:{base}" if spec.sweep.objective_class else base
