"""`mopt export --format vllm`, started by hand: the exported files, without mopt, serve the
same model with the same engine configuration as mopt's own launch.

mopt's own launch is a recorded log (``tests/data/export/tiny-cpu-mopt-launch.json``: the
lines vLLM logged when `mopt apply recipes/tiny-cpu.yaml` started it, the model folder
written as ``<MODEL>``), so the test costs one vLLM launch. vLLM logs at start the options
that differ from its defaults (``non-default args: {...}``) and the engine configuration
(``Initializing a V1 LLM engine ... with config: ...``); both must match, the port aside.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from model_optimizer.engine.supervisor import free_port
from model_optimizer.export import ExportOptions, export_recipe
from model_optimizer.recipe import load_recipe
from model_optimizer.recipe.render import model_location

from .conftest import ROOT, TINY_RECIPE

pytestmark = pytest.mark.integration

RECORDED = ROOT / "tests" / "data" / "export" / "tiny-cpu-mopt-launch.json"
NON_DEFAULT = re.compile(r"non-default args: (\{.*\})")
ENGINE_CONFIG = re.compile(r"Initializing a V1 LLM engine \(v[^)]*\) with config: (.*)")


def started_lines(log: str, model: str) -> dict:
    """What vLLM logged of its configuration, the model folder as ``<MODEL>``."""
    args = ast.literal_eval(NON_DEFAULT.search(log).group(1))
    args.pop("port")
    config = ENGINE_CONFIG.search(log).group(1).strip()
    return {"non_default_args": json.loads(json.dumps(args).replace(model, "<MODEL>")),
            "engine_config": config.replace(model, "<MODEL>")}


def env_file(path: Path) -> dict[str, str]:
    values = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name] = shlex.split(value)[0]
    return values


def get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read() or b"{}")


def wait_healthy(proc: subprocess.Popen, url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the exported server exited during start-up"
        try:
            urllib.request.urlopen(f"{url}/health", timeout=2).close()
            return
        except OSError:
            time.sleep(1)
    raise AssertionError(f"no /health within {timeout_s} s")


def stop_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    with contextlib.suppress(ProcessLookupError):  # engine-core children left in the group
        os.killpg(proc.pid, signal.SIGKILL)


def test_the_exported_vllm_files_serve_what_mopt_launched(tiny_model, tmp_path):
    loaded = load_recipe(TINY_RECIPE)
    port = free_port("127.0.0.1")
    out = export_recipe(loaded, tmp_path / "deploy", tmp_path / "runs",  # never validated:
                        ExportOptions(("vllm",), port=port, force=True))  # the shipped demo
    serve = json.loads((out.folder / "serve.json").read_text())
    env = {**os.environ, **env_file(out.folder / serve["env_file"])}
    log_path = tmp_path / "server.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen(serve["argv"], cwd=out.folder, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://{serve['host']}:{serve['port']}"
    try:
        # not a start-time test: CI runs it beside another real-engine test, and a start took
        # 5 min there once (the other test's engine busy on the same core)
        wait_healthy(proc, url, max(600, loaded.spec.engine.startup_timeout_s))
        assert [m["id"] for m in get(f"{url}/v1/models")["data"]] == ["tiny-llama"]
        request = urllib.request.Request(
            f"{url}/v1/completions", headers={"Content-Type": "application/json"},
            data=json.dumps({"model": "tiny-llama", "prompt": "hello", "max_tokens": 4,
                             "temperature": 0}).encode())
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.loads(response.read())
        assert answer["usage"]["completion_tokens"] == 4
    finally:
        stop_group(proc)
    log = log_path.read_text()
    recorded = json.loads(RECORDED.read_text())
    model = model_location(loaded.spec, loaded.base_dir)
    assert started_lines(log, model) == {k: recorded[k] for k in ("non_default_args",
                                                                  "engine_config")}
    assert f"'port': {port}" in log
