"""Cross-field rules of ``hardware.placement`` (applied by ``engine/placement.py``).

Explicit core lists name this machine's logical CPUs: a core mopt may not run on (not in
``os.sched_getaffinity``) is an error, found at load time (exit 2) rather than as a failed
``sched_setaffinity`` during a run. The engine's cores on ``cpu`` become vLLM's
``VLLM_CPU_OMP_THREADS_BIND``, so a recipe may not set both, and one list cannot bind the
several ranks of ``tensor_parallel_size`` > 1.
"""

from __future__ import annotations

import os
from typing import Any

from model_optimizer.errors import Diagnostic
from model_optimizer.recipe.yamlsource import SourceMap

PARTS = ("engine", "server", "client")
OMP_BIND_ENV = "VLLM_CPU_OMP_THREADS_BIND"


def machine_cores() -> list[int]:
    """The logical CPUs this process may run on, sorted."""
    return sorted(os.sched_getaffinity(0))


def placement_rules(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    """Problems of an explicit ``hardware.placement`` (none for 'auto' and 'none')."""
    setting = recipe["hardware"].get("placement", "auto")
    if not isinstance(setting, dict):
        return []
    cores, out = machine_cores(), []
    for part in PARTS:
        missing = [core for core in setting.get(part) or [] if core not in cores]
        if missing:
            out.append(smap.diagnostic(
                ("hardware", "placement", part),
                f"placement.{part} names core(s) {missing}, which this machine does not "
                f"offer (cores {cores})", f"use cores from {cores}, or placement: auto"))
    if setting.get("engine") and recipe["hardware"]["accelerator"] == "cpu":
        out.extend(_cpu_engine_rules(recipe, smap))
    return out


def _cpu_engine_rules(recipe: dict[str, Any], smap: SourceMap) -> list[Diagnostic]:
    engine, out = recipe["engine"], []
    if OMP_BIND_ENV in engine["env"]:
        out.append(smap.diagnostic(
            ("hardware", "placement", "engine"),
            f"placement.engine and engine.env.{OMP_BIND_ENV} both bind vLLM's CPU worker",
            f"keep one: placement.engine becomes {OMP_BIND_ENV}"))
    if engine.get("tensor_parallel_size", 1) > 1:
        out.append(smap.diagnostic(
            ("hardware", "placement", "engine"),
            "placement.engine is one core list, but tensor_parallel_size > 1 needs one per "
            "rank", f"set engine.env.{OMP_BIND_ENV} with '|' between the ranks' lists"))
    return out
