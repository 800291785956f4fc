"""The sweep strategies as registered classes, behind one interface.

A strategy searches the knob (:meth:`SweepStrategy.search`), then its outcome chooses,
confirms and writes (:meth:`SweepStrategy.outcome`). Each module of this package defines
one and registers it by the name ``sweep.strategy`` and ``--strategy`` take
(``@SweepStrategy.register("relaunch")``); the names themselves are the recipe's
(``recipe/sweep_rules.py``), and ``auto`` picks one of them (``search/sweep/probe.py``). The
registry imports every module of this package the first time it is read, so adding a
strategy is adding a module with its class (and its name in ``sweep_rules``), and its test.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import ClassVar

from model_optimizer.search.sweep.choice import choose_and_confirm
from model_optimizer.search.sweep.state import SweepOutcome
from model_optimizer.search.sweep.steps import SweepSteps

_REGISTRY: dict[str, type[SweepStrategy]] = {}


class SweepStrategy:
    """One way to search a knob, on the sweep's steps (``search/sweep/steps.py``)."""

    name: ClassVar[str]
    #: one live server at the ceiling: ``sweep.max`` becomes the scan ceiling at the start
    scans: ClassVar[bool] = False

    def __init__(self, steps: SweepSteps):
        self.steps = steps
        self.state = steps.state

    def search(self) -> SweepStrategy:
        """Search and re-measure; the strategy that then chooses (this one, or the one it
        handed over to)."""
        raise NotImplementedError

    def outcome(self) -> SweepOutcome:
        """Choose, confirm and write (``search/sweep/choice.py``)."""
        return choose_and_confirm(self.steps)

    @classmethod
    def register(cls, name: str) -> Callable[[type[SweepStrategy]], type[SweepStrategy]]:
        """Class decorator: make the class the strategy called ``name`` (once)."""
        def decorate(strategy: type[SweepStrategy]) -> type[SweepStrategy]:
            if _REGISTRY.get(name, strategy) is not strategy:
                raise ValueError(f"sweep strategy {name!r} is registered twice")
            strategy.name = name
            _REGISTRY[name] = strategy
            return strategy
        return decorate

    @classmethod
    def resolve(cls, name: str) -> type[SweepStrategy]:
        """The strategy called ``name`` (KeyError naming the registered ones)."""
        registry = _load()
        if name not in registry:
            raise KeyError(f"no sweep strategy {name!r}; registered: {', '.join(registry)}")
        return registry[name]


def _load() -> dict[str, type[SweepStrategy]]:
    """The registry, after importing every module of this package."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return _REGISTRY


def strategy_names() -> tuple[str, ...]:
    """The registered strategies' names."""
    return tuple(sorted(_load()))
