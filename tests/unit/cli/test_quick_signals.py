"""Several quick signals end mopt with exit 130 and one line, never a traceback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
COMMAND = """
import threading, time
import typer
from model_optimizer.cli.common import handle_errors
from model_optimizer.signals import terminate_as_interrupt

app = typer.Typer()

@app.command()
@handle_errors
def work() -> None:
    terminate_as_interrupt()
    threading.Thread(target=time.sleep, args=(3,)).start()  # like the load's workers
    print("ready", flush=True)
    time.sleep(60)

app()
"""


def test_three_quick_signals_exit_130_without_a_traceback():
    proc = subprocess.Popen([sys.executable, "-c", COMMAND], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)  # mopt is on its way out, waiting for its threads
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        output, _ = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, output
    assert "Traceback" not in output and "interrupted" in output, output
