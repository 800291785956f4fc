"""The typed view of a loaded fleet: instances (each a checked recipe), routes, the router.

Built after every check passed (``fleet/load.py``); what the plan, the router's
configuration and the run read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from model_optimizer.recipe import LoadedRecipe
from model_optimizer.recipe.yamlsource import SourceMap

#: how a route's requests are recognized by the router
BY_MODEL, BY_TAG, BY_LENGTH, BY_FALLBACK = "model", "tag", "length", "fallback"
#: where a balanced group's request must land: any of its instances (no class rule decides)
ANY_INSTANCE = "*"


@dataclass(frozen=True)
class Route:
    """``router.routes[i]``: class ``request_class`` goes to instance ``to``."""

    request_class: str
    to: str
    model: str | None = None
    tag: str | None = None
    max_prompt_tokens: int | None = None
    index: int = 0  # its place in router.routes (for messages)

    @property
    def by(self) -> str:
        """How the router recognizes the class: model, tag, length or fallback (nothing)."""
        if self.model is not None:
            return BY_MODEL
        if self.tag is not None:
            return BY_TAG
        return BY_LENGTH if self.max_prompt_tokens is not None else BY_FALLBACK

    @classmethod
    def of(cls, index: int, item: dict) -> Route:
        """From one resolved ``router.routes`` item."""
        return cls(item["class"], item["to"], item.get("model"), item.get("tag"),
                   item.get("max_prompt_tokens"), index)


@dataclass(frozen=True)
class RouterSpec:
    """``router``: where it listens, the name clients ask for, the rules, the fallback."""

    port: int
    model: str
    routes: tuple[Route, ...]
    fallback: str | None
    startup_timeout_s: float
    #: a LiteLLM routing strategy: every instance is one model group under ``model``,
    #: balanced by it, and no class rule (``mopt split --replicas``); None: the rules decide
    balance: str | None = None

    def length_routes(self) -> list[Route]:
        """The length rules, shortest threshold first (the order the router tries them)."""
        return sorted((r for r in self.routes if r.by == BY_LENGTH),
                      key=lambda r: (r.max_prompt_tokens, r.index))


@dataclass(frozen=True)
class Instance:
    """One instance: its recipe as served (fleet hardware, port, share, its classes)."""

    name: str
    recipe: LoadedRecipe
    cores: tuple[int, ...] | None
    classes: tuple[str, ...]  # the workload classes the routes send it

    @property
    def served_name(self) -> str:
        """The model name the instance's vLLM answers to."""
        return self.recipe.spec.model.served_name or self.recipe.name


@dataclass
class LoadedFleet:
    """A fleet file that passed every check."""

    path: Path | None
    source_text: str
    document: dict
    resolved: dict
    source_map: SourceMap
    instances: dict[str, Instance]
    router: RouterSpec
    front: LoadedRecipe  # the router's side: the workload and SLOs the load runs with
    warnings: list = field(default_factory=list)

    @property
    def name(self) -> str:
        """The fleet's name."""
        return self.resolved["name"]

    @property
    def accelerator(self) -> str:
        """The shared accelerator's name (``hardware.accelerator``)."""
        return self.front.spec.hardware.accelerator
