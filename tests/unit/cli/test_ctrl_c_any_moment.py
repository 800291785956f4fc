"""Issue 37: a SIGINT sent 60 s into a 120 s load once left `mopt apply` running. Two windows
lost it: SIGINT inherited ignored (a background job of a script) was never given a handler
back, and a cancel of the load's main task (what ``asyncio.run`` makes of SIGINT) landing while
the load's monitors stopped was swallowed. Now a SIGINT at any moment of a load exits 130 with
the archive ``interrupted`` and sealed, within a few seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from model_optimizer.archive.manifest import verify_archive
from model_optimizer.cli.main import app
from model_optimizer.errors import EXIT_INTERRUPTED
from model_optimizer.load import clock, run_load_sync
from model_optimizer.load.mock_server import MockServer
from tests.unit.mock_mopt import MOCK_MOPT, ROOT, mock_env

EXIT_WITHIN_S = 5.0  # expected: well under a second (in-flight requests are cancelled)
LOAD = {"prompt_tokens": 8, "output_tokens": 4, "concurrency": 2, "num_requests": 8,
        "warmup_requests": 0, "request_timeout_s": 20}


@pytest.fixture
def ctrl_c_raises():
    """Ctrl-C raises, as in a terminal (a test run in the background inherits it ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_mopt_started_with_sigint_ignored_gives_ctrl_c_its_handler_back():
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with pytest.raises(SystemExit):
            app(["--version"], prog_name="mopt")
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_sigint_while_the_load_monitors_stop_is_not_swallowed(ctrl_c_raises, monkeypatch):
    """The window: the load is done, its monitors are being stopped, and Ctrl-C lands."""
    real_run = clock.LoopLag.run

    async def slow_to_stop(self):
        try:
            await real_run(self)
        except BaseException:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while run() awaits this monitor
            time.sleep(0.05)  # the handler runs: the load's main task is cancelled
            raise
    monkeypatch.setattr(clock.LoopLag, "run", slow_to_stop)
    with MockServer() as server, pytest.raises(KeyboardInterrupt):
        run_load_sync(server.url, "mock-model", LOAD, ["a prompt"])


def _bench_interrupted_after(delay_s: float, runs: Path,
                             tokenizer: Path) -> tuple[object, float]:
    """`mopt bench --url` on a long load, sent SIGINT ``delay_s`` after its first request
    finished (warm-up, then the measured window); the result and the seconds from the
    signal to the exit."""
    sent: list[float] = []

    def ctrl_c() -> None:
        deadline = time.monotonic() + 30
        while not list(runs.glob("*/requests.jsonl")) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(delay_s)
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)
    timer = threading.Thread(target=ctrl_c, daemon=True)
    with MockServer(ttft_s=0.002, itl_s=0.001) as server:
        timer.start()
        result = CliRunner().invoke(app, [
            "bench", "--url", server.url, "--duration", "60", "--concurrency", "2",
            "--output-tokens", "4", "--prompt-tokens", "8", "--warmup", "20",
            "--tokenizer", str(tokenizer), "--runs-dir", str(runs)])
        timer.join(5)
    return result, time.monotonic() - sent[0]


@pytest.mark.parametrize("delay_s", [0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7,
                                     0.9, 1.2])
def test_a_sigint_at_any_moment_of_a_load_exits_130_interrupted_and_sealed(
        delay_s, tmp_path, ctrl_c_raises, tiny_model_dir):
    result, took_s = _bench_interrupted_after(delay_s, tmp_path / "runs", tiny_model_dir)
    assert result.exit_code == EXIT_INTERRUPTED, (result.output, result.exception)
    assert took_s < EXIT_WITHIN_S
    [archive] = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    assert json.loads((archive / "status.json").read_text())["status"] == "interrupted"
    assert verify_archive(archive) == []


@pytest.mark.slow  # seconds: a whole `mopt apply` process on the mock engine
def test_apply_started_with_sigint_ignored_still_stops_on_sigint(tiny_model_dir, tmp_path):
    runs, log = tmp_path / "runs", tmp_path / "mopt.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [*MOCK_MOPT, "apply", str(ROOT / "recipes" / "tiny-cpu.yaml"), "--runs-dir",
             str(runs), "--set", "workload.num_requests=100000", "--set",
             "workload.duration_s=300"], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
            env=mock_env(), start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))  # `mopt ... &`
    try:
        deadline = time.monotonic() + 120
        while not list(runs.glob("*/requests.jsonl")) and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(30) == EXIT_INTERRUPTED, log.read_text()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    [archive] = [p for p in runs.iterdir() if p.is_dir()]
    assert json.loads((archive / "status.json").read_text())["status"] == "interrupted"
