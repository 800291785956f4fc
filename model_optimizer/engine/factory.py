"""Engine factories: which server process a run starts, and the supervisor that watches it.

The runner asks a factory for the command (what is archived: ``${VAR}`` references kept) and
then for the supervised process. ``VllmEngine`` (the default) starts vLLM's OpenAI server.
``MockEngine`` starts mopt's mock server (``load/mock_server.py``) with the same vLLM flags
plus the mock's timing and faults, so the orchestration around the engine (runner, telemetry,
archive, searches, process-group stop) is tested fast and for real, without vLLM.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from model_optimizer.engine.placement import Placement, resolve_placement
from model_optimizer.engine.supervisor import EngineProcess, free_port
from model_optimizer.recipe.render import (
    Recipe,
    check_references,
    engine_options,
    expand_references,
    options_to_argv,
    server_env,
    vllm_argv,
)

if TYPE_CHECKING:
    from model_optimizer.recipe import LoadedRecipe

MOCK_SERVER_MODULE = "model_optimizer.load.mock_server"


@dataclass(frozen=True)
class EngineCommand:
    """The server's argument list and extra environment, as archived (references unexpanded)."""

    argv: list[str]
    env: dict[str, str]


class EngineFactory(Protocol):
    """What the runner needs from an engine: a command, then a supervised process."""

    def command(self, recipe: Recipe, base_dir: Path | None, port: int) -> EngineCommand:
        """The command that serves ``recipe`` on ``port``."""
        ...

    def process(self, command: EngineCommand, log_path: Path, base_url: str,
                startup_timeout_s: float) -> EngineProcess:
        """The supervised (not yet started) process for ``command``."""
        ...


class VllmEngine:
    """vLLM's OpenAI-compatible server (``python -m vllm.entrypoints.openai.api_server``)."""

    def command(self, recipe: Recipe, base_dir: Path | None, port: int) -> EngineCommand:
        """vLLM's argv for ``recipe`` and the recipe's environment."""
        return EngineCommand(vllm_argv(recipe, base_dir, port=port), server_env(recipe))

    def process(self, command: EngineCommand, log_path: Path, base_url: str,
                startup_timeout_s: float) -> EngineProcess:
        """An EngineProcess with ``${VAR}`` references expanded from mopt's environment."""
        environ = dict(os.environ)
        return EngineProcess(expand_references(command.argv, environ),
                             expand_references(command.env, environ), log_path, base_url,
                             startup_timeout_s=startup_timeout_s)


@dataclass(frozen=True)
class MockEngine(VllmEngine):
    """mopt's mock server as the engine: vLLM's flags, the mock's clock and injected faults.

    ``max_num_seqs`` from the recipe limits the mock's batch, so throughput plateaus like an
    engine's. ``fail_start`` is printed as the log before exiting 1 (a vLLM message there is
    classified like vLLM's own); ``die_after`` exits when that request arrives;
    ``engine_core`` starts a child in the group (``group``) or in its own session (``setsid``);
    ``capacity`` caps the batch whatever max_num_seqs says (a throughput knee to find);
    ``answers`` scripts an instance's answers by its served name (quality evals on the mock).
    """

    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    startup_s: float = 0.0
    fail_start: str | None = None
    die_after: int = 0
    engine_core: str = "none"
    capacity: int = 0
    answers: tuple[tuple[str, str], ...] = ()  # (served name, JSON file {prompt: answer})

    def command(self, recipe: Recipe, base_dir: Path | None, port: int) -> EngineCommand:
        """The mock server with the recipe's vLLM flags (it ignores those it does not model)."""
        options = engine_options(recipe, base_dir, port)
        served = dict(options).get("served-model-name")
        mock = [f"--mock-answers={file}" for name, file in self.answers if name == served]
        mock += ["--ttft-ms", str(self.ttft_ms), "--itl-ms", str(self.itl_ms),
                "--mock-startup-s", str(self.startup_s), "--mock-die-after", str(self.die_after),
                "--mock-engine-core", self.engine_core, "--mock-capacity", str(self.capacity)]
        if self.fail_start:
            mock += ["--mock-fail-start", self.fail_start]
        argv = [sys.executable, "-m", MOCK_SERVER_MODULE,
                *options_to_argv(options), *mock]
        return EngineCommand(argv, server_env(recipe))


@dataclass(frozen=True)
class ServerPlan:
    """A recipe's server, rendered but not started: the command to archive and its URL."""

    factory: EngineFactory
    command: EngineCommand
    base_url: str
    startup_timeout_s: float
    placement: Placement | None = None

    def process(self, log_path: Path) -> EngineProcess:
        """The supervised (not yet started) process, logging to ``log_path``."""
        process = self.factory.process(self.command, log_path, self.base_url,
                                       self.startup_timeout_s)
        process.placement = self.placement
        return process


def plan_server(loaded: LoadedRecipe, factory: EngineFactory | None = None) -> ServerPlan:
    """Render ``loaded``'s server on its port (a free one when unset); vLLM by default.

    The recipe's placement (``engine/placement.py``) adds its engine variables to the
    command and is applied to the process once it is ready.
    """
    spec = loaded.spec
    host = spec.engine.host
    port = spec.engine.port or free_port(host)
    factory = factory or VllmEngine()
    base_url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    placement = resolve_placement(spec)
    command = factory.command(spec, loaded.base_dir, port)
    command = EngineCommand(command.argv, {**command.env, **placement.engine_env})
    check_references([*command.argv, *command.env.values()], dict(os.environ))  # no archive yet
    return ServerPlan(factory, command, base_url, spec.engine.startup_timeout_s, placement)
