"""The real ``mopt`` command with mopt's mock server as its engine.

``python -m tests.unit.mock_mopt ARGS`` is ``mopt ARGS`` in a process of its own, except that
every server a run starts is ``engine.factory.MockEngine`` (``MOPT_TEST_MOCK_ENGINE``: its
fields as JSON; by default a 50 ms first token, 5 ms a token, a batch capped at 4): for what
needs a process (a signal, two processes at once). ``invoke_mock_mopt`` runs the same command
line in the test's own process, which saves the interpreter's start and the tokenizer
library's import (seconds each, per command). The tests that drive the command line end to
end for orchestration (Ctrl-C, --resume, archives, history, workers) use them, so they run
without vLLM; what only vLLM can show stays in tests/integration.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MOCK_MOPT = [sys.executable, "-m", "tests.unit.mock_mopt"]
ENGINE_ENV = "MOPT_TEST_MOCK_ENGINE"
DEFAULT_ENGINE = {"ttft_ms": 50, "itl_ms": 5, "capacity": 4}


def mock_env(engine: dict | None = None) -> dict[str, str]:
    """The environment of a mock ``mopt``: wide output, the mock engine's fields."""
    return {**os.environ, "COLUMNS": "120", ENGINE_ENV: json.dumps(engine or DEFAULT_ENGINE)}


def run_mock_mopt(*args: str, timeout: float = 300,
                  engine: dict | None = None) -> subprocess.CompletedProcess:
    """Run ``mopt ARGS`` on the mock engine to completion."""
    return subprocess.run([*MOCK_MOPT, *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=mock_env(engine))


def _ctrl_c_enabled() -> None:
    """In the child: SIGINT back to its default (a background shell job inherits it ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_mock_mopt(*args: str, log: Path, engine: dict | None = None) -> subprocess.Popen:
    """Start ``mopt ARGS`` on the mock engine in its own session, its output in ``log``."""
    handle = open(log, "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen([*MOCK_MOPT, *args], stdout=handle, stderr=subprocess.STDOUT,
                            cwd=ROOT, start_new_session=True, env=mock_env(engine),
                            preexec_fn=_ctrl_c_enabled)


@dataclass(frozen=True)
class Invoked:
    """What an in-process command left: its exit code and output (as a CompletedProcess)."""

    returncode: int
    stdout: str
    stderr: str


def invoke_mock_mopt(*args: str, engine: dict | None = None) -> Invoked:
    """Run ``mopt ARGS`` in this process on the mock engine; signal handlers restored after.

    An exception the command did not handle comes back in ``stderr`` with its traceback.
    """
    from typer.testing import CliRunner

    import model_optimizer.engine.factory as factory
    from model_optimizer.cli.main import app

    mock = factory.MockEngine(**(engine or DEFAULT_ENGINE))
    saved_engine = factory.VllmEngine
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP,
                                                       signal.SIGQUIT, signal.SIGINT)}
    factory.VllmEngine = lambda: mock
    try:
        result = CliRunner().invoke(app, list(args), env={"COLUMNS": "120"})
    finally:
        factory.VllmEngine = saved_engine
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return Invoked(result.exit_code, result.stdout, stderr)


def main() -> None:
    """Swap the default engine for the mock, then run mopt's command line."""
    import model_optimizer.engine.factory as factory
    from model_optimizer.cli.main import app

    fields = json.loads(os.environ.get(ENGINE_ENV) or json.dumps(DEFAULT_ENGINE))
    engine = factory.MockEngine(**fields)
    factory.VllmEngine = lambda: engine  # plan_server's default
    app(prog_name="mopt")


if __name__ == "__main__":
    main()
