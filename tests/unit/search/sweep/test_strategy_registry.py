"""Sweep strategies are registered classes (``search/sweep/strategies/``): one per name the recipe
allows besides ``auto``, and the loop runs whichever class its state names."""

from __future__ import annotations

import json

import pytest

from model_optimizer.recipe import load_recipe
from model_optimizer.recipe.sweep_rules import AUTO, SCANNING, STRATEGIES
from model_optimizer.search.sweep import strategies as registry
from model_optimizer.search.sweep.flags import SweepFlags
from model_optimizer.search.sweep.loop import start_sweep
from model_optimizer.search.sweep.strategies import SweepStrategy, strategy_names
from tests.unit.search.sweep.test_loop import ROOT, FakeMeasure


def test_every_strategy_the_recipe_names_is_a_registered_class():
    assert set(strategy_names()) == set(STRATEGIES) - {AUTO}
    assert {name for name in strategy_names() if SweepStrategy.resolve(name).scans} \
        == set(SCANNING)
    assert all(SweepStrategy.resolve(name).name == name for name in strategy_names())
    with pytest.raises(KeyError, match="registered: "):
        SweepStrategy.resolve("grid")


def test_a_strategy_is_registered_once():
    with pytest.raises(ValueError, match="registered twice"):
        SweepStrategy.register("relaunch")(type("Twin", (SweepStrategy,), {}))


def test_the_loop_runs_the_registered_class(tmp_path, monkeypatch):
    others = {k: v for k, v in registry._load().items() if k != "relaunch"}
    monkeypatch.setattr(registry, "_REGISTRY", others)

    @SweepStrategy.register("relaunch")  # replaced here, as a new module would add one
    class StartOnly(SweepStrategy):
        def search(self) -> SweepStrategy:
            self.steps.take(self.state.config.start, "grow", "the start value only")
            return self

    recipe = tmp_path / "tiny.yaml"
    recipe.write_text((ROOT / "recipes" / "tiny-cpu.yaml").read_text()
                      .replace("../models/tiny-llama", str(ROOT / "models" / "tiny-llama")))
    loaded = load_recipe(recipe, ["sweep.confirm_duration_s=0", "sweep.strategy=relaunch"])
    measure = FakeMeasure()
    outcome = start_sweep(loaded, tmp_path / "runs", flags=SweepFlags(start=2),
                          output=tmp_path / "out.yaml", measure=measure)
    assert measure.calls == [2] and outcome.exit_code == 0 and outcome.chosen.value == 2
    state = json.loads((outcome.archive / "state.json").read_text())
    assert state["strategy"] == "relaunch" and state["decisions"][0]["reason"] == \
        "the start value only"
