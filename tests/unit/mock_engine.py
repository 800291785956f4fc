"""A small recipe served by mopt's mock server as the engine (``engine.factory.MockEngine``):
real processes, real HTTP, real archives, no vLLM. Used by the runner, measure and search tests.
"""

from __future__ import annotations

from pathlib import Path

import psutil

from model_optimizer.recipe import LoadedRecipe, load_recipe

RECIPE = """\
# a recipe served by the mock engine
recipe_version: 1
name: mockrun
model:
  path: {model}
  served_name: mock-served
engine:
  block_size: 32            # kept: the mock ignores flags it does not model
  max_num_seqs: 4
  enforce_eager: true
  startup_timeout_s: 30
  env:
    MOPT_TEST_SECRET_TOKEN: '${{MOPT_TEST_SECRET_TOKEN}}'
hardware:
  accelerator: cpu
  memory_gib: 2
workload:
  prompt_tokens: 16
  output_tokens: 8
  num_requests: 24
  warmup_requests: 2
{extra}"""


def mock_recipe(folder: Path, model_dir: Path, extra: str = "",
                overrides: list[str] | None = None) -> LoadedRecipe:
    """Write the mock recipe (``extra``: more top-level YAML) to ``folder`` and load it."""
    path = folder / "mockrun.yaml"
    path.write_text(RECIPE.format(model=model_dir, extra=extra))
    return load_recipe(path, overrides)


def children_pids() -> set[int]:
    """PIDs of this test process's live descendants (the engine and its children)."""
    pids = set()
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.status() != psutil.STATUS_ZOMBIE:
                pids.add(proc.pid)
        except psutil.Error:
            continue
    return pids


def alive(pids: set[int]) -> set[int]:
    """The members of ``pids`` still running."""
    left = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                left.add(pid)
        except psutil.NoSuchProcess:
            continue
    return left
