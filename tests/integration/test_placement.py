"""``hardware.placement: auto`` on the real vLLM CPU server: one launch, affinities read back.

vLLM binds its OpenMP worker process to the cores it does not reserve; mopt puts the API
server and the engine core (vLLM's scheduler) on the reserved one once the server is ready.
Read back with psutil, all must match the placement mopt resolved and archived, and vLLM's
own log must name the server's core as reserved.
"""

from __future__ import annotations

import re

import psutil
import pytest

from model_optimizer.engine.factory import plan_server
from model_optimizer.recipe import load_recipe
from model_optimizer.recipe.placement_rules import machine_cores

from .conftest import TINY_RECIPE

pytestmark = pytest.mark.integration


@pytest.mark.skipif(len(machine_cores()) < 2, reason="placement needs 2 cores")
def test_auto_placement_on_the_cpu_engine(tiny_model, tmp_path):
    loaded = load_recipe(TINY_RECIPE, ["engine.startup_timeout_s=540"])  # a busy machine
    server = plan_server(loaded)
    placement = server.placement
    assert placement.mode == "auto" and placement.server == (machine_cores()[-1],)
    engine = server.process(tmp_path / "engine.log")
    with engine:
        engine.wait_ready()
        api = psutil.Process(engine.pid)
        titles = {" ".join(proc.cmdline()): proc for proc in api.children(recursive=True)}
        core = [proc for title, proc in titles.items() if "::EngineCore" in title]
        workers = [proc for title, proc in titles.items() if "::Worker" in title]
        assert len(core) == 1 and len(workers) == 1, list(titles)
        assert api.cpu_affinity() == core[0].cpu_affinity() == list(placement.server)
        assert workers[0].cpu_affinity() == list(placement.engine)  # vLLM's OpenMP binding
        assert engine.placement_seen[f"{api.name()} {api.pid}"] == list(placement.server)
    log = (tmp_path / "engine.log").read_text()
    reserved = re.search(r"reserved_cpus=\[([\d, ]*)\]", log)
    assert reserved and [int(c) for c in reserved.group(1).split(",")] == list(placement.server)
