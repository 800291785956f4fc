"""The quality eval serves through the engine factory (``engine.factory.plan_server``), like
every other launch: with the mock engine in its place the eval's server is the mock, its
command archived (redacted) under the archive's names, the server stopped afterwards."""

from __future__ import annotations

import json

import httpx
import psutil

import model_optimizer.engine.factory as factory
from model_optimizer.archive import RunArchive
from model_optimizer.archive.names import ENGINE_LOG, SERVER_FILE
from model_optimizer.engine.factory import MockEngine
from model_optimizer.quality.evaluate import serve
from tests.unit.mock_engine import mock_recipe


def test_the_eval_server_comes_from_the_engine_factory(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("MOPT_TEST_SECRET_TOKEN", "s3cret-value")
    monkeypatch.setattr(factory, "VllmEngine", lambda: MockEngine())
    loaded = mock_recipe(tmp_path, tiny_model_dir)
    archive = RunArchive.create(tmp_path / "runs", "eval", kind="eval")
    phases = []
    with serve(loaded, archive, lambda event: phases.append(event.kind)) as endpoint:
        assert httpx.get(f"{endpoint.base_url}/v1/models", timeout=10).status_code == 200
        assert endpoint.model == "mock-served"
        pid = endpoint.engine.pid
    server = json.loads((archive.path / SERVER_FILE).read_text())
    assert server["argv"][2] == "model_optimizer.load.mock_server"
    assert "s3cret-value" not in json.dumps(server)
    assert (archive.path / ENGINE_LOG).is_file()
    assert phases[:1] == ["starting"] and "stopping" in phases
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    archive.close()
