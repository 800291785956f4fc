"""Checks that need one running vLLM CPU server of the tiny recipe, as mopt's engine factory
starts it (``hardware.placement: auto``), and nothing else: one launch for the module.

- ``hardware.placement: auto``: vLLM binds its OpenMP worker process to the cores it does not
  reserve; mopt puts the API server on the reserved one once the server is ready and leaves
  the engine core (vLLM's scheduler, which busy-waits on the worker) floating. Read back
  with psutil, all must match the placement mopt resolved and archived, and vLLM's own log
  must name the server's core as reserved.
- `mopt bench --url` against it, with a tokenizer folder: the workload's exact lengths.
- What mopt trusts from a server (issue 24, docs/security.md): `mopt bench --url` given the
  server's ``/v1`` URL with user info and a query (joined as ``/v1/completions?...``, never
  ``/v1/v1`` nor a path after the query; the user info sent as Basic auth, which vLLM without
  ``--api-key`` ignores), no ``--tokenizer`` (the tokenize calls and ``/v1/models`` go through
  the total-deadline client), telemetry scraped from ``/metrics`` through it, and vLLM's real
  ``usage`` accepted by the plausibility rule.

When the module ends, the whole server process group must be gone.
"""

from __future__ import annotations

import json
import os
import re

import psutil
import pytest

from model_optimizer.engine.factory import plan_server
from model_optimizer.engine.supervisor import group_members
from model_optimizer.recipe import load_recipe
from model_optimizer.recipe.placement_rules import OMP_BIND_ENV, machine_cores

from .conftest import TINY_RECIPE, only_archive, read_jsonl, run_mopt

pytestmark = pytest.mark.integration
SECRET = "pw-integration-4242"


@pytest.fixture(scope="module")
def served(tiny_model, tmp_path_factory):
    """The tiny recipe's server as the engine factory plans it, healthy; stopped (its whole
    process group) when the module ends. Plain ``auto``: without the binding conftest.py
    exports on odd workers (``engines_spread_over_cores``)."""
    inherited = os.environ.pop(OMP_BIND_ENV, None)
    try:
        loaded = load_recipe(TINY_RECIPE, ["engine.startup_timeout_s=540",  # a busy machine
                                           "workload.warmup_steady_max_s=null"])
        plan = plan_server(loaded)
        log = tmp_path_factory.mktemp("served") / "engine.log"
        engine = plan.process(log)
        with engine:
            engine.wait_ready()
            yield plan, engine, log
            group = engine.pid
    finally:
        if inherited is not None:
            os.environ[OMP_BIND_ENV] = inherited
    assert group_members(group) == []  # the whole server group is gone after stop()


@pytest.mark.skipif(len(machine_cores()) < 2, reason="placement needs 2 cores")
def test_auto_placement_on_the_cpu_engine(served):
    plan, engine, log = served
    placement = plan.placement
    assert placement.mode == "auto" and placement.server == (machine_cores()[-1],)
    api = psutil.Process(engine.pid)
    titles = {" ".join(proc.cmdline()): proc for proc in api.children(recursive=True)}
    core = [proc for title, proc in titles.items() if "::EngineCore" in title]
    workers = [proc for title, proc in titles.items() if "::Worker" in title]
    assert len(core) == 1 and len(workers) == 1, list(titles)
    assert api.cpu_affinity() == list(placement.server)
    assert core[0].cpu_affinity() == list(placement.engine)    # beside the worker
    assert workers[0].cpu_affinity() == list(placement.engine)  # vLLM's OpenMP binding
    assert engine.placement_seen[f"{api.name()} {api.pid}"] == list(placement.server)
    reserved = re.search(r"reserved_cpus=\[([\d, ]*)\]", log.read_text())
    assert reserved and [int(c) for c in reserved.group(1).split(",")] == list(placement.server)


def test_bench_url_against_a_running_server(served, tiny_model, tmp_path):
    _, engine, _ = served
    runs = tmp_path / "runs"
    result = run_mopt("bench", "--url", engine.base_url, "--tokenizer", str(tiny_model),
                      "--prompt-tokens", "48", "--output-tokens", "16",
                      "--concurrency", "4", "--num-requests", "40", "--runs-dir", str(runs),
                      "--json", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    metrics = json.loads(result.stdout)["metrics"]
    assert metrics["completed"] == 40 and metrics["failed"] == 0
    records = [r for r in read_jsonl(only_archive(runs) / "requests.jsonl") if not r["warmup"]]
    assert {r["output_tokens"] for r in records} == {16}
    assert {r["prompt_tokens"] for r in records} == {48}


def test_bench_url_with_v1_credentials_and_query_is_measured_and_scrubbed(served, tmp_path):
    _, engine, _ = served
    runs = tmp_path / "runs"
    url = engine.base_url.replace("http://", f"http://alice:{SECRET}@") + f"/v1?trace={SECRET}"
    result = run_mopt("bench", "--url", url, "--prompt-tokens", "24",
                      "--output-tokens", "8", "--concurrency", "2", "--num-requests",
                      "12", "--runs-dir", str(runs), timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    archive = only_archive(runs)
    records = [r for r in read_jsonl(archive / "requests.jsonl") if not r["warmup"]]
    assert len(records) == 12 and all(r["ok"] for r in records)
    assert {r["output_tokens"] for r in records} == {8}  # vLLM's usage passes the rule
    assert {r["prompt_tokens"] for r in records} == {24}  # counted by vLLM's /tokenize
    samples = read_jsonl(archive / "telemetry.jsonl")
    assert any(s.get("num_requests_running") is not None for s in samples)  # /metrics read
    run = json.loads((archive / "run.json").read_text())
    assert run["url"].startswith("http://alice:***redacted***@")
    for path in runs.rglob("*"):
        if path.is_file() and path.suffix != ".sqlite":
            assert SECRET not in path.read_text(errors="replace"), path
    assert SECRET not in result.stdout + result.stderr
