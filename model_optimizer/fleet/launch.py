"""Starting a fleet's processes: every instance's server and the router, each a supervised
process group (``engine.supervisor.EngineProcess``) logging at the top of the archive.

The router is LiteLLM's proxy from its own environment: ``$MOPT_ROUTER_BIN``, else
``.venv-router/bin/litellm`` in the checkout (``examples/setup-router.sh``), else
``litellm`` on the PATH. It runs offline (``LITELLM_LOCAL_MODEL_COST_MAP=True``: no cost map
fetched), with one worker, a master key made for the run in its environment only.
"""

from __future__ import annotations

import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from model_optimizer.engine.factory import EngineFactory, ServerPlan, plan_server
from model_optimizer.engine.supervisor import EngineProcess, free_port
from model_optimizer.errors import UsageError
from model_optimizer.fleet.router import MASTER_KEY_ENV
from model_optimizer.fleet.spec import LoadedFleet

ROUTER_BIN_ENV = "MOPT_ROUTER_BIN"
REPO_ROOT = Path(__file__).resolve().parents[2]
ROUTER_HEALTH = "/health/liveliness"  # LiteLLM's, answered without the key
ROUTER_CONFIG = "router.yaml"
ROUTER_LOG = "router.log"
#: the variable mopt's client reads the router's key from (workload.api_key_env)
CLIENT_KEY_ENV = "MOPT_FLEET_ROUTER_KEY"
#: the router's environment besides its key: offline (no cost map fetched), INFO logs
ROUTER_ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "INFO"}


def router_args(config: str, host: str, port: int) -> list[str]:
    """The router's arguments after its ``litellm`` command: config, address, one worker
    (what ``mopt apply`` starts and ``mopt export`` writes)."""
    return ["--config", config, "--host", host, "--port", str(port), "--num_workers", "1"]


def router_executable() -> str:
    """The ``litellm`` command to start; UsageError with the setup step when none is found."""
    explicit = os.environ.get(ROUTER_BIN_ENV)
    candidates = [Path(explicit)] if explicit else [REPO_ROOT / ".venv-router" / "bin" / "litellm"]
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = None if explicit else shutil.which("litellm")
    if found:
        return found
    where = f"${ROUTER_BIN_ENV} ({explicit})" if explicit else ".venv-router, nor on the PATH"
    raise UsageError(f"the router (LiteLLM's proxy) is not installed: not in {where}; run "
                     "`bash examples/setup-router.sh` (it installs the `router` extra into "
                     ".venv-router)")


def engine_log(name: str) -> str:
    """An instance's server log, at the top of the archive (where the reaper looks)."""
    return f"engine.{name}.log"


def plan_instances(fleet: LoadedFleet,
                   factory: EngineFactory | None) -> dict[str, ServerPlan]:
    """Each instance's server, rendered on a port of its own."""
    plans: dict[str, ServerPlan] = {}
    taken: set[str] = set()
    for name, instance in fleet.instances.items():
        plan = plan_server(instance.recipe, factory)
        while plan.base_url in taken:  # two free ports picked alike: pick again
            plan = plan_server(instance.recipe, factory)
        taken.add(plan.base_url)
        plans[name] = plan
    return plans


@dataclass(frozen=True)
class RouterPlan:
    """The router's command, environment (with the run's key) and URL, not yet started."""

    argv: list[str]
    env: dict[str, str]
    base_url: str
    key: str
    startup_timeout_s: float

    def process(self, log_path: Path) -> EngineProcess:
        """The supervised router process (stopped like an engine: its whole group)."""
        return EngineProcess(self.argv, self.env, log_path, self.base_url,
                             startup_timeout_s=self.startup_timeout_s, grace_s=5.0,
                             health_path=ROUTER_HEALTH)


def plan_router(fleet: LoadedFleet, config_path: Path, executable: str,
                taken: set[int]) -> RouterPlan:
    """The router on its port (a free one, not an instance's, when unset)."""
    port = fleet.router.port or free_port()
    while port in taken:
        port = free_port()
    key = "sk-mopt-" + secrets.token_hex(16)
    argv = [executable, *router_args(str(config_path), "127.0.0.1", port)]
    env = {**ROUTER_ENV, MASTER_KEY_ENV: key}
    return RouterPlan(argv, env, f"http://127.0.0.1:{port}", key,
                      fleet.router.startup_timeout_s)
