"""Fixtures for tests that drive the real vLLM CPU server and the real `mopt` process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from model_optimizer.models.tiny import build_tiny_model
from model_optimizer.recipe.placement_rules import OMP_BIND_ENV, machine_cores

ROOT = Path(__file__).resolve().parents[2]
TINY_RECIPE = ROOT / "recipes" / "tiny-cpu.yaml"
MOPT = [sys.executable, "-m", "model_optimizer"]


TEST_MARK = "MOPT_TEST_RUN_ID"

#: The order CI hands the integration modules to its workers (``-n 3 --dist loadfile
#: --no-loadscope-reorder``; without that flag xdist sorts the modules by their number of
#: tests and this order is not followed). A worker is given its next module as soon as two
#: or fewer of its tests are pending, so with one-test modules it holds two at once and
#: "longest first" is not the best order: this one is benchmarks/ci_order.py's, which replays
#: xdist's scheduler on a clean-clone run's durations (+-25%) and ends the three workers
#: within a minute of each other (852, 845 and 807 s on the 2026-12-07 run's durations, the
#: steady warm-ups since removed; 941 s for the order xdist chose then). The short modules
#: come last, to fill the gaps. Quality and optimize need the trained tiny model: CI builds it
#: before this tier (.ci/run); without that head start quality's fixture trains it (about 3.5
#: minutes on one core) and optimize waits on its lock. Modules not listed follow, by name.
FIRST = ("test_probe_fit", "test_capacity", "test_probe_scan", "test_optimize",
         "test_tune_scan", "test_workloads", "test_quality", "test_kill_orphans", "test_fleet",
         "test_export", "test_plan_moe_capacity", "test_apply", "test_quantize", "test_served",
         "test_signals", "test_tune", "test_report_browser", "test_sweep")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Integration modules in the order of :data:`FIRST` (the others keep theirs, after)."""
    def rank(item: pytest.Item) -> tuple[int, int]:
        name = item.path.stem
        if item.path.parent != Path(__file__).parent:
            return (-1, 0)  # not an integration test: where it was
        return (FIRST.index(name) if name in FIRST else len(FIRST), 0)

    order = {id(item): position for position, item in enumerate(items)}
    items.sort(key=lambda item: (*rank(item), order[id(item)]))


def vllm_processes(mark: str) -> set[int]:
    """PIDs of vLLM server or engine-core processes started under this test's mark.

    Every process a test starts inherits ``MOPT_TEST_RUN_ID`` from the test's environment,
    so servers started by anything else on the machine are not mistaken for leaks.
    """
    found = set()
    for proc in psutil.process_iter(["pid", "cmdline", "name"]):
        try:
            text = " ".join(proc.info["cmdline"] or []) + " " + (proc.info["name"] or "")
            if "vllm" not in text.lower() and "EngineCore" not in text:
                continue
            if proc.environ().get(TEST_MARK) == mark:
                found.add(proc.info["pid"])
        except psutil.Error:
            continue
    return found


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """The tiny local model the CPU recipe serves (built once, nothing downloaded)."""
    return build_tiny_model(ROOT / "models" / "tiny-llama")


@pytest.fixture(scope="session")
def trained_model(pytestconfig) -> Path:
    """The tiny model trained on the synthetic corpus, built on first use and cached in
    ``models/tiny-llama-trained`` (setup-cpu.sh leaves it out: the main job does not need it).

    Training takes minutes on CPU, so its progress is shown even though pytest captures output.
    """
    from model_optimizer.models.trained import build_trained_model

    capture = pytestconfig.pluginmanager.getplugin("capturemanager")

    def progress(step: int, steps: int, loss: float) -> None:
        if step == 1 or step % 50 == 0 or step == steps:
            with capture.global_and_fixture_disabled():
                print(f"\ntraining the tiny model for the quality tests: step {step}/{steps}, "
                      f"loss {loss:.3f}", end="", flush=True)

    return build_trained_model(ROOT / "models" / "tiny-llama-trained", on_step=progress)


@pytest.fixture
def recipe_copy(tmp_path, tiny_model) -> Path:
    """The tiny CPU recipe in a scratch folder (a sweep rewrites its recipe file)."""
    path = tmp_path / "tiny-cpu.yaml"
    text = TINY_RECIPE.read_text().replace("../models/tiny-llama", str(tiny_model))
    # CI's time: the steady warm-up (up to 30 s a run) is tested once, in test_apply
    text = text.replace("  warmup_steady_max_s: 30", "  warmup_steady_max_s: null")
    path.write_text(text)
    return path


def spread_engine_cores(worker: str, cores: list[int]) -> dict[str, str]:
    """The environment that puts this xdist worker's vLLM engines on their own core.

    vLLM's CPU engine binds its OpenMP worker to the first cores and leaves the last for the
    API server and the client (``hardware.placement: auto``), so with two test workers both
    engines shared core 0 while core 1 waited. Every odd worker (``gw1``, ``gw3``...) exports
    ``VLLM_CPU_OMP_THREADS_BIND`` = the last core: its servers inherit it and ``auto`` follows
    it (the server and client on the core before). ``test_served.py`` checks plain ``auto``.
    """
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else 0
    if len(cores) < 2 or index % 2 == 0:
        return {}
    return {OMP_BIND_ENV: str(cores[-1])}


@pytest.fixture(scope="session", autouse=True)
def engines_spread_over_cores():
    """Each xdist worker's engines on a core of their own (:func:`spread_engine_cores`)."""
    extra = spread_engine_cores(os.environ.get("PYTEST_XDIST_WORKER", ""), machine_cores())
    saved = {key: os.environ.get(key) for key in extra}
    os.environ.update(extra)
    yield extra
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(autouse=True)
def no_vllm_left_behind(monkeypatch):
    """Every integration test must leave no vLLM process running."""
    mark = uuid.uuid4().hex
    monkeypatch.setenv(TEST_MARK, mark)
    yield
    deadline = time.monotonic() + 5
    while (left := vllm_processes(mark)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"vLLM processes left behind: {sorted(left)}"


def run_mopt(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the real `mopt` command to completion."""
    return subprocess.run([*MOPT, *args], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT, env={**os.environ, "COLUMNS": "120"})


def _ctrl_c_enabled() -> None:
    """In the child: SIGINT back to its default, as in a terminal.

    A shell's background job (``bash .ci/run &``, nohup) inherits SIGINT ignored, and an
    ignored signal stays ignored across exec, so the tests' Ctrl-C would never reach mopt.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_mopt(*args: str, log: Path) -> subprocess.Popen:
    """Start `mopt` in its own session (signals sent by the test reach only it)."""
    handle = open(log, "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen([*MOPT, *args], stdout=handle, stderr=subprocess.STDOUT, cwd=ROOT,
                            start_new_session=True, env={**os.environ, "COLUMNS": "120"},
                            preexec_fn=_ctrl_c_enabled)


def exit_code(proc: subprocess.Popen, log: Path, timeout: float) -> int:
    """``proc``'s exit code; a clear failure with mopt's output when it outlives ``timeout``."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"mopt still running {timeout:.0f} s later; its output:\n"
                             f"{log.read_text()}") from None


def only_archive(runs: Path) -> Path:
    """The single run folder under ``runs``."""
    folders = [p for p in runs.iterdir() if p.is_dir()]
    assert len(folders) == 1, folders
    return folders[0]


def read_jsonl(path: Path) -> list[dict]:
    """All complete JSON lines of a file (a torn last line is ignored)."""
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(ValueError):
            out.append(json.loads(line))
    return out


def wait_for_measured_requests(runs: Path, count: int, proc: subprocess.Popen,
                               timeout: float = 300) -> Path:
    """Wait until the run archive holds ``count`` measured request records."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "mopt exited before the load started"
        folders = [p for p in runs.iterdir() if p.is_dir()] if runs.exists() else []
        if folders and (folders[0] / "requests.jsonl").exists():
            measured = [r for r in read_jsonl(folders[0] / "requests.jsonl") if not r["warmup"]]
            if len(measured) >= count:
                return folders[0]
        time.sleep(0.2)
    raise AssertionError("the load did not start in time")
