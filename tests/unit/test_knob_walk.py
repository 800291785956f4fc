"""docs/design.md's walk of one knob (``mopt sweep --param max_num_seqs``) from the command
line to vLLM's argv is a fact about the code: the modules it lists, in its order, are
these; each exists and holds the function named; each is reached from one before it (an
import either way, or the sweep's strategy registry); the count it states is theirs; and
the value really arrives in the argv."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from model_optimizer.recipe import LoadedRecipe
from model_optimizer.recipe.render import vllm_argv
from model_optimizer.search.sweep.strategies import SweepStrategy
from tests.unit.test_layers import imports_of, module_name

ROOT = Path(__file__).resolve().parents[2]
HEADING = "### Following one knob from the command line to vLLM's argv"

#: (module file, what in it the value passes through), in the value's order
WALK = [
    ("model_optimizer/cli/sweep.py", "sweep"),
    ("model_optimizer/usecase/sweep.py", "sweep"),
    ("model_optimizer/search/sweep/loop.py", "start_sweep"),
    ("model_optimizer/search/sweep/flags.py", "build_config"),
    ("model_optimizer/search/sweep/strategies/relaunch.py", "Relaunch"),
    ("model_optimizer/search/sweep/strategy.py", "next_value"),
    ("model_optimizer/search/sweep/model.py", "round_value"),
    ("model_optimizer/search/sweep/steps.py", "SweepSteps"),
    ("model_optimizer/search/core/knobs.py", "engine_values"),
    ("model_optimizer/recipe/__init__.py", "LoadedRecipe"),
    ("model_optimizer/recipe/overrides.py", "variations_of"),
    ("model_optimizer/recipe/spec.py", "EngineSpec"),
    ("model_optimizer/search/core/session.py", "SearchSession"),
    ("model_optimizer/search/measure.py", "measure_configuration"),
    ("model_optimizer/runner.py", "run_recipe"),
    ("model_optimizer/engine/factory.py", "plan_server"),
    ("model_optimizer/recipe/render.py", "vllm_argv"),
    ("model_optimizer/recipe/knobs.py", "KNOBS"),
]


def section() -> str:
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    start = text.index(HEADING)
    end = text.index("\n#", start + len(HEADING))
    return text[start:end]


def test_the_design_document_lists_these_modules_in_this_order_and_counts_them():
    listed = re.findall(r"^\d+\. `(model_optimizer/[\w/]+\.py)`", section(), re.M)
    assert listed == [path for path, _ in WALK]
    assert f"today it crosses **{len(WALK)} modules**" in section()


def test_each_module_holds_what_the_value_passes_through():
    for path, name in WALK:
        assert (ROOT / path).is_file(), path
        module = importlib.import_module(module_name(ROOT / path))
        assert hasattr(module, name), f"{path} has no {name}"


def _edge(a: Path, b: Path) -> bool:
    """True when ``a`` imports ``b`` or ``b`` imports ``a`` (function-level imports too)."""
    def imported(src: Path) -> set[str]:
        return {name for _, name in imports_of(src.read_text(encoding="utf-8"),
                                               module_name(src), src.name == "__init__.py")}
    return module_name(b) in imported(a) or module_name(a) in imported(b)


def test_each_module_is_reached_from_one_before_it():
    paths = [ROOT / path for path, _ in WALK]
    registered = SweepStrategy.resolve("relaunch").__module__
    for i, path in enumerate(paths[1:], start=1):
        if module_name(path) == registered:
            continue  # the sweep's loop finds it by name in the strategy registry
        assert any(_edge(earlier, path) for earlier in paths[:i]), path


def test_the_swept_value_reaches_the_argv_typed(tmp_path):
    from model_optimizer.search.sweep.steps import SweepSteps
    from tests.unit.mock_engine import mock_recipe

    loaded = mock_recipe(tmp_path, tmp_path)

    class Steps:  # what step_recipe reads of a sweep's steps
        state = type("State", (), {"config": type("Config", (), {"param": "max_num_seqs"})})

    Steps.loaded = loaded
    step: LoadedRecipe = SweepSteps.step_recipe(Steps(), 64)
    assert step.spec.engine.max_num_seqs == 64
    assert [(v.key, v.value, v.source) for v in step.variations][-1] == (
        "engine.max_num_seqs", 64, "sweep max_num_seqs 64")
    assert step.overrides == loaded.overrides  # no --set text was made for it
    argv = vllm_argv(step.resolved, step.base_dir)
    assert argv[argv.index("--max-num-seqs") + 1] == "64"
