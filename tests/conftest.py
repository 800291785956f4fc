"""Fixtures shared by the whole test suite."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import typer.testing

REPO_ROOT = Path(__file__).resolve().parents[1]
CHECKED_OUT_TINY_MODEL = REPO_ROOT / "models" / "tiny-llama"
INTEGRATION = REPO_ROOT / "tests" / "integration"

# pytest-xdist's workers start with COLUMNS=80 in their environment. mopt's console honours
# COLUMNS as the user's width, so under `-n 2` (CI) every table and verdict the in-process
# CLI printed wrapped at 80 columns, while the same test without -n read them whole (CI's
# split test failed on a wrapped verdict). The console is built when mopt's CLI is first
# imported: from here on the suite runs as into a pipe, whatever runs it.
os.environ.pop("COLUMNS", None)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """CI's real-engine tiers collect only ``tests/integration`` (``.ci/run``: 3 s against 11 s
    for the whole suite, in each of their workers), so a test marked ``integration`` anywhere
    else would run in no tier: refused wherever it is collected (the unit tier collects all)."""
    stray = [item.nodeid for item in items
             if item.get_closest_marker("integration") and INTEGRATION not in item.path.parents]
    if stray:
        raise pytest.UsageError("integration tests outside tests/integration (CI's real-engine "
                                "tiers would not collect them): " + ", ".join(stray))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama checkpoint with tokenizer: ``models/tiny-llama`` if built, else a fresh one.

    Building takes about 5 s and needs transformers and torch (the ``tiny`` extra).
    """
    if (CHECKED_OUT_TINY_MODEL / "tokenizer.json").is_file():
        return CHECKED_OUT_TINY_MODEL
    pytest.importorskip("transformers")
    from model_optimizer.models.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session", autouse=True)
def cli_command_built_once():
    """Typer's CliRunner rebuilds the whole click command tree from the functions' signatures
    on every ``invoke`` (a few hundred ms each, most of a ``validate``); build it once per app
    for the session. The command is the same object ``mopt`` builds at start, used as is."""
    build = typer.testing._get_command
    built: dict[int, object] = {}

    def once(app):
        if id(app) not in built:
            built[id(app)] = build(app)
        return built[id(app)]

    typer.testing._get_command = once
    yield
    typer.testing._get_command = build
