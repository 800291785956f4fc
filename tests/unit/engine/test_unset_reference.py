"""A recipe reading an unset ``${VAR}`` is refused before anything starts (issue 37)."""

from __future__ import annotations

import pytest

from model_optimizer.engine.factory import MockEngine
from model_optimizer.errors import UsageError
from model_optimizer.runner import run_recipe
from tests.unit.mock_engine import mock_recipe


def test_an_unset_reference_refuses_the_launch_before_an_archive_exists(
        tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.delenv("MOPT_TEST_SECRET_TOKEN", raising=False)
    loaded = mock_recipe(tmp_path, tiny_model_dir)
    with pytest.raises(UsageError, match=r"\$\{MOPT_TEST_SECRET_TOKEN\}.*unset or empty.*"
                                         r"export MOPT_TEST_SECRET_TOKEN=\.\.\."):
        run_recipe(loaded, tmp_path / "runs", engine_factory=MockEngine())
    assert not list((tmp_path / "runs").glob("*/status.json"))  # no archive left running
