"""The export formats as registered classes: the one list of their names.

Each format module (``vllm``, ``compose``, ``kubernetes``, ``systemd``) defines one
:class:`ExportFormat` subclass and registers it with :func:`register`; ``export/run.py``
renders the asked ones from one :class:`Rendering`, and the option check and the CLI help
read the names from here. A fleet's formats (``fleet_vllm``, ``fleet_compose``,
``fleet_kubernetes``, ``fleet_systemd``) are :class:`FleetFormat` subclasses registered
with :func:`register_fleet` under the same names, rendered from a :class:`FleetRendering`
(``export/fleet_run.py``). The registry imports every module of the ``export`` package the
first time it is read, so adding a format is adding a module with its class, and its test.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from model_optimizer.export.deployment import Deployment, ExportError
from model_optimizer.export.schedule import DEFAULT_SCHEDULE, OFF, Schedule, parse_schedule
from model_optimizer.recipe import LoadedRecipe

if TYPE_CHECKING:
    from model_optimizer.export.fleet import FleetDeployment
    from model_optimizer.fleet.spec import LoadedFleet

#: the default image of the tune workers: vLLM's image with mopt installed (docs/deploy.md)
TUNE_IMAGE = "mopt-worker:latest"
#: where a fleet's router listens unless told otherwise
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class ExportOptions:
    """What ``mopt export`` was asked for, besides the recipe and the folder."""

    formats: tuple[str, ...]
    port: int | None = None
    force: bool = False
    python: str = field(default_factory=lambda: sys.executable)
    replicas: int = 1
    hpa_max: int | None = None
    queue_target: int = 4
    tune_workers: int = 0
    tune_image: str = TUNE_IMAGE
    #: cron schedule of the deployment's own ``mopt verify --url`` (``off``: none)
    verify_schedule: str = DEFAULT_SCHEDULE
    #: a fleet's router: the address it listens on (vllm, systemd) or is published on
    #: (compose); loopback unless told otherwise
    router_host: str = LOOPBACK


def schedule_of(options: ExportOptions) -> Schedule | None:
    """The checked verification schedule, None when ``off`` (UsageError on a bad one)."""
    text = options.verify_schedule.strip()
    return None if text.lower() == OFF else parse_schedule(text)


@dataclass(frozen=True)
class Rendering:
    """Everything a format renders from: the deployment, the recipe, where the files go."""

    dep: Deployment
    loaded: LoadedRecipe
    folder: Path
    options: ExportOptions
    runs_base: Path
    schedule: Schedule | None

    @property
    def startup_timeout_s(self) -> float:
        """The recipe's start-up timeout (health checks wait this long)."""
        return self.loaded.spec.engine.startup_timeout_s


class ExportFormat:
    """One export format: its name (``--format``), its place in the list, its files."""

    name: ClassVar[str]
    order: ClassVar[int]  # where the CLI help and the option check list it
    #: rendered whatever was asked (the config every other format runs)
    always: ClassVar[bool] = False

    def render(self, given: Rendering) -> dict[str, str]:
        """The format's files, by name."""
        raise NotImplementedError


@dataclass(frozen=True)
class FleetRendering:
    """Everything a fleet format renders from: the fleet's deployment, the fleet, where."""

    fleet: FleetDeployment
    loaded: LoadedFleet
    folder: Path
    options: ExportOptions


class FleetFormat:
    """One export format of a fleet: its name (``--format``, as for a recipe), its files."""

    name: ClassVar[str]
    order: ClassVar[int]
    always: ClassVar[bool] = False

    def render(self, given: FleetRendering) -> dict[str, str]:
        """The format's files, by path under the export folder."""
        raise NotImplementedError


_REGISTRY: dict[str, type[ExportFormat]] = {}
_FLEET_REGISTRY: dict[str, type[FleetFormat]] = {}


def _add(registry: dict, cls: type) -> type:
    if cls.name in registry and registry[cls.name] is not cls:
        raise ValueError(f"export format {cls.name!r} is registered twice")
    registry[cls.name] = cls
    return cls


def register(cls: type[ExportFormat]) -> type[ExportFormat]:
    """Class decorator: make ``cls`` the format named ``cls.name`` (once)."""
    return _add(_REGISTRY, cls)


def register_fleet(cls: type[FleetFormat]) -> type[FleetFormat]:
    """Class decorator: make ``cls`` the fleet format named ``cls.name`` (once)."""
    return _add(_FLEET_REGISTRY, cls)


def _load() -> dict[str, type[ExportFormat]]:
    """The registry, after importing every module of this package (each format registers
    itself when its module is imported)."""
    package = __name__.rpartition(".")[0]
    for module in pkgutil.iter_modules(importlib.import_module(package).__path__):
        importlib.import_module(f"{package}.{module.name}")
    return _REGISTRY


def format_names() -> tuple[str, ...]:
    """The registered formats' names, in their order."""
    _load()
    return tuple(sorted(_REGISTRY, key=lambda name: (_REGISTRY[name].order, name)))


def resolve(name: str) -> ExportFormat:
    """The format named ``name`` (ExportError naming the choices for an unknown one)."""
    if name not in _load():
        raise ExportError(f"unknown export format {name}; choose from "
                          f"{', '.join(format_names())} (--format may repeat)")
    return _REGISTRY[name]()


def rendered(given: Rendering) -> list[ExportFormat]:
    """The formats to render: those always rendered, then the asked ones, in order."""
    asked = set(given.options.formats)
    return [resolve(name) for name in format_names()
            if name in asked or _REGISTRY[name].always]


def fleet_format_names() -> tuple[str, ...]:
    """The fleet formats' names, in their order."""
    _load()
    return tuple(sorted(_FLEET_REGISTRY, key=lambda n: (_FLEET_REGISTRY[n].order, n)))


def resolve_fleet(name: str) -> FleetFormat:
    """The fleet format named ``name`` (ExportError naming the choices)."""
    _load()
    if name not in _FLEET_REGISTRY:
        raise ExportError(f"unknown export format {name} for a fleet; choose from "
                          f"{', '.join(fleet_format_names())} (--format may repeat)")
    return _FLEET_REGISTRY[name]()


def rendered_fleet(given: FleetRendering) -> list[FleetFormat]:
    """The fleet formats to render: those always rendered, then the asked ones, in order."""
    asked = set(given.options.formats)
    return [resolve_fleet(name) for name in fleet_format_names()
            if name in asked or _FLEET_REGISTRY[name].always]
