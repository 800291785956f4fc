"""Process placement (``engine/placement.py``): resolution per accelerator and setting, the
recipe rules (exit 2), and real affinities read back from this process and the mock server."""

from __future__ import annotations

import json
import os
import threading

import psutil
import pytest
from typer.testing import CliRunner

from model_optimizer.cli.main import app
from model_optimizer.engine.factory import MockEngine, plan_server
from model_optimizer.engine.placement import (
    client_placed,
    parse_core_list,
    resolve_placement,
    thread_ids,
)
from model_optimizer.errors import RecipeError
from model_optimizer.events import LoadProgress
from model_optimizer.recipe import load_recipe_text
from model_optimizer.recipe.placement_rules import machine_cores
from model_optimizer.runner import run_recipe
from tests.unit.mock_engine import mock_recipe
from tests.unit.recipe.conftest import VALID

CORES = machine_cores()
two_cores = pytest.mark.skipif(len(CORES) < 2, reason="placement needs 2 cores to move a thread")


def spec(*sets: str, text: str = VALID):
    return load_recipe_text(text, "r.yaml", list(sets)).spec


def test_auto_on_cpu_puts_server_and_client_on_the_core_vllm_reserves():
    placed = resolve_placement(spec("hardware.accelerator=cpu"), cores=[0, 1], environ={})
    assert (placed.engine, placed.server, placed.client) == ((0,), (1,), (1,))
    assert placed.engine_env == {}  # vLLM binds its own worker ...
    assert placed.pin_engine and placed.keep_workers  # ... and the engine core goes beside it
    wide = resolve_placement(spec("hardware.accelerator=cpu"), cores=range(8), environ={})
    assert wide.engine == tuple(range(7)) and wide.server == wide.client == (7,)


def test_auto_on_cpu_follows_the_recipes_own_vllm_binding():
    bound = resolve_placement(spec("hardware.accelerator=cpu",
                                   "engine.env.VLLM_CPU_OMP_THREADS_BIND=0-2"), cores=range(4))
    assert bound.engine == (0, 1, 2) and bound.server == bound.client == (3,)
    reserved = resolve_placement(spec("hardware.accelerator=cpu",
                                      "engine.env.VLLM_CPU_NUM_OF_RESERVED_CPU=2"),
                                 cores=range(4))
    assert reserved.engine == (0, 1) and reserved.server == (2, 3)
    floating = resolve_placement(spec("hardware.accelerator=cpu",
                                      "engine.env.VLLM_CPU_OMP_THREADS_BIND=nobind"), cores=[0, 1])
    assert floating.server is None and "nobind" in floating.note


def test_auto_on_cpu_follows_a_binding_inherited_from_mopts_environment():
    """The server inherits mopt's environment: an exported binding binds vLLM's worker just
    the same, so the server and the client go elsewhere (under the recipe's own value)."""
    inherited = {"VLLM_CPU_OMP_THREADS_BIND": "1", "PATH": "/bin"}
    mirrored = resolve_placement(spec("hardware.accelerator=cpu"), cores=[0, 1],
                                 environ=inherited)
    assert (mirrored.engine, mirrored.server, mirrored.client) == ((1,), (0,), (0,))
    assert mirrored.engine_env == {}  # vLLM reads the inherited value itself
    reserved = resolve_placement(spec("hardware.accelerator=cpu"), cores=range(4),
                                 environ={"VLLM_CPU_NUM_OF_RESERVED_CPU": "2"})
    assert reserved.engine == (0, 1) and reserved.server == (2, 3)
    recipe_wins = resolve_placement(spec("hardware.accelerator=cpu",
                                         "engine.env.VLLM_CPU_OMP_THREADS_BIND=0"),
                                    cores=[0, 1], environ=inherited)
    assert (recipe_wins.engine, recipe_wins.server) == ((0,), (1,))
    on_gpu = resolve_placement(spec(), cores=range(4), environ=inherited)
    assert on_gpu.client == (3,)  # a GPU engine does not read it


def test_auto_on_a_gpu_moves_the_client_away_from_server_and_engine():
    placed = resolve_placement(spec(), cores=range(4))  # VALID is an A10 recipe
    assert placed.client == (3,) and placed.server == placed.engine == (0, 1, 2)
    assert placed.pin_engine and placed.engine_env == {}


def test_nothing_is_placed_on_one_core_with_none_or_for_cpu_tensor_parallel():
    for placed in (resolve_placement(spec("hardware.accelerator=cpu"), cores=[0]),
                   resolve_placement(spec("hardware.placement=none"), cores=range(4)),
                   resolve_placement(spec("hardware.accelerator=cpu",
                                          "engine.tensor_parallel_size=2",
                                          "hardware.count=2"), cores=range(8))):
        assert placed.server is None and placed.client is None and placed.engine_env == {}
    assert resolve_placement(spec("hardware.placement=none")).describe() == \
        "none: nothing placed"


def test_explicit_lists_bind_vllms_cpu_worker_and_are_archived_as_given():
    last = CORES[-1]
    placed = resolve_placement(spec("hardware.accelerator=cpu",
                                    f"hardware.placement={{engine: [{CORES[0]}], "
                                    f"client: [{last}]}}"))
    assert placed.engine_env == {"VLLM_CPU_OMP_THREADS_BIND": str(CORES[0])}
    assert placed.to_dict() == {"mode": "explicit", "engine": [CORES[0]], "server": None,
                                "client": [last], "engine_env": placed.engine_env, "note": ""}
    on_gpu = resolve_placement(spec(f"hardware.placement={{engine: [{CORES[0]}]}}"))
    assert on_gpu.engine_env == {} and on_gpu.pin_engine and not on_gpu.keep_workers
    assert placed.pin_engine and placed.keep_workers


def test_parse_core_list_reads_vllms_cpuset_syntax():
    assert parse_core_list("0-2,5") == (0, 1, 2, 5)
    assert parse_core_list("0-1|4-5") == (0, 1, 4, 5)


def test_a_core_this_machine_lacks_is_a_usage_error_naming_the_key():
    with pytest.raises(RecipeError) as caught:
        spec("hardware.placement={server: [4096], client: [0]}")
    text = str(caught.value)
    assert "placement.server names core(s) [4096]" in text and str(CORES) in text
    with pytest.raises(RecipeError, match="both bind vLLM's CPU worker"):
        spec("hardware.accelerator=cpu", "engine.env.VLLM_CPU_OMP_THREADS_BIND=0",
             f"hardware.placement={{engine: [{CORES[0]}]}}")
    with pytest.raises(RecipeError, match="hardware.placement"):
        spec("hardware.placement=everywhere")


def test_validate_exits_2_and_show_prints_the_placement(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(VALID.replace("accelerator: A10", "accelerator: A10\n  placement:\n"
                                 "    client: [4096]"))
    result = CliRunner().invoke(app, ["validate", str(bad)])
    assert result.exit_code == 2 and "placement.client" in result.output
    good = tmp_path / "good.yaml"
    good.write_text(VALID.replace("accelerator: A10", "accelerator: cpu"))
    shown = CliRunner().invoke(app, ["show", str(good)])
    assert shown.exit_code == 0 and "placement (cores on this machine): " in shown.output
    data = json.loads(CliRunner().invoke(app, ["show", str(good), "--json"]).output)
    assert data["placement"] == resolve_placement(spec("hardware.accelerator=cpu")).to_dict()


@two_cores
def test_the_client_runs_on_its_cores_and_gets_its_affinity_back():
    before = os.sched_getaffinity(0)
    placed = resolve_placement(spec(f"hardware.placement={{client: [{CORES[-1]}]}}"))
    seen = {}
    with client_placed(placed):
        worker = threading.Thread(target=lambda: seen.update(t=os.sched_getaffinity(0)))
        worker.start()
        worker.join()
        inside = [os.sched_getaffinity(tid) for tid in thread_ids(os.getpid())]
    assert inside and all(mask == {CORES[-1]} for mask in inside) and seen["t"] == {CORES[-1]}
    assert os.sched_getaffinity(0) == before


@two_cores
def test_a_ready_server_is_placed_and_its_engine_env_rendered(tmp_path, tiny_model_dir):
    last = CORES[-1]
    loaded = mock_recipe(tmp_path, tiny_model_dir, overrides=[
        f"hardware.placement={{engine: [{CORES[0]}], server: [{last}], client: [{last}]}}"])
    server = plan_server(loaded, MockEngine(engine_core="group"))
    assert server.command.env["VLLM_CPU_OMP_THREADS_BIND"] == str(CORES[0])
    outcome = run_recipe(loaded, tmp_path / "runs", engine_factory=MockEngine())
    assert outcome.ok
    run = json.loads((outcome.archive / "run.json").read_text())
    assert run["placement"]["server"] == [last]
    assert run["env"]["VLLM_CPU_OMP_THREADS_BIND"] == str(CORES[0])
    seen = json.loads((outcome.archive / "status.json").read_text())["placement_seen"]
    assert list(seen.values()) == [[last]]  # the mock server, read back with psutil


@two_cores
def test_the_server_process_is_pinned_once_ready(tmp_path, tiny_model_dir):
    loaded = mock_recipe(tmp_path, tiny_model_dir, overrides=[
        f"hardware.placement={{server: [{CORES[-1]}]}}"])
    engine = plan_server(loaded, MockEngine()).process(tmp_path / "engine.log")
    with engine:
        engine.wait_ready()
        threads = thread_ids(engine.pid)
        assert threads and all(os.sched_getaffinity(t) == {CORES[-1]} for t in threads)
        assert psutil.Process(engine.pid).cpu_affinity() == [CORES[-1]]


@two_cores
def test_the_load_client_measures_on_its_cores(tmp_path, tiny_model_dir):
    from model_optimizer.load.mock_server import MockServer
    from model_optimizer.runner import bench_endpoint
    loaded = load_recipe_text(
        "recipe_version: 1\nname: b\nmodel: {path: endpoint}\nworkload: {prompt_tokens: 16, "
        "output_tokens: 4, concurrency: 2, num_requests: 10, warmup_requests: 0}\n",
        "<test>", [f"hardware.placement={{client: [{CORES[-1]}]}}"])
    before, during = os.sched_getaffinity(0), []

    def on_event(event):
        if isinstance(event, LoadProgress):  # emitted from the load, on the client's thread
            during.append(os.sched_getaffinity(0))
    with MockServer() as server:
        outcome = bench_endpoint(server.url, loaded, "mock-model", str(tiny_model_dir),
                                 tmp_path, on_event=on_event)
    assert outcome.ok and during and all(mask == {CORES[-1]} for mask in during)
    assert os.sched_getaffinity(0) == before
    assert json.loads((outcome.archive / "run.json").read_text())["placement"]["client"] == [
        CORES[-1]]


@two_cores
def test_the_engine_core_is_left_to_float_on_the_cpu_engine(tmp_path, tiny_model_dir):
    """vLLM's engine core busy-waits on its worker: pinned beside the API server and the
    client it cut the tiny server's throughput 2.7-8x (docs/benchmarks/quiet-test-bed.md).
    Only the API server is placed; its child (the mock's engine core) keeps every core."""
    loaded = mock_recipe(tmp_path, tiny_model_dir, overrides=[
        f"hardware.placement={{server: [{CORES[-1]}]}}"])
    engine = plan_server(loaded, MockEngine(engine_core="group")).process(
        tmp_path / "engine.log")
    with engine:
        engine.wait_ready()
        children = psutil.Process(engine.pid).children(recursive=True)
        assert children and psutil.Process(engine.pid).cpu_affinity() == [CORES[-1]]
        assert all(child.cpu_affinity() == list(CORES) for child in children)
