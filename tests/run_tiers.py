"""The whole suite, both tiers at once: the README's test command.

    .venv/bin/python tests/run_tiers.py [pytest options for both tiers]

The integration tier (real vLLM CPU servers, three modules at a time) leaves about a third
of two cores idle: it waits on launches, windows and polls. The unit tier (about 400
CPU-seconds) runs beside it, a little lower in priority, and fills that idle time instead
of adding its 4-5 minutes before it (docs/benchmarks/ci-time.md). Each tier's lines are
printed as they come, after its name; the exit code is the unit tier's when it failed,
else the integration tier's (a tier that options such as ``-k`` leave without a test,
pytest's exit 5, counts as passed when the other ran tests). Ctrl-C reaches both (they share
this terminal's process group); a SIGTERM or SIGHUP sent to this script alone is passed on
to both as Ctrl-C, so each stops its vLLM servers as after a Ctrl-C.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTEST = [sys.executable, "-m", "pytest"]
NO_TESTS = 5  # pytest's exit code when nothing was collected
#: name, pytest arguments, niceness (the unit tier yields to the launches it runs beside)
TIERS = (("unit", ["-m", "not integration", "-n", "2"], 5),
         ("integration", ["-m", "integration", "-n", "3", "--dist", "loadfile"], 0))


def _niced(niceness: int):
    def lower() -> None:
        os.nice(niceness)
        # a background job (`bash .ci/run &`, nohup) starts with SIGINT ignored, and an
        # ignored signal stays ignored across exec: pytest could then not be stopped cleanly
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    return lower


def _relay(name: str, stream, lock: threading.Lock) -> None:
    width = max(len(n) for n, _, _ in TIERS)
    for line in iter(stream.readline, ""):
        with lock:
            sys.stdout.write(f"{name:<{width}} | {line}")
            sys.stdout.flush()


def main(extra: list[str]) -> int:
    lock = threading.Lock()
    procs, relays = [], []
    for name, args, niceness in TIERS:
        proc = subprocess.Popen([*PYTEST, *args, *extra], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1,
                                preexec_fn=_niced(niceness))
        relay = threading.Thread(target=_relay, args=(name, proc.stdout, lock), daemon=True)
        relay.start()
        procs.append(proc)
        relays.append(relay)

    def pass_on(signum: int, _frame: object) -> None:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)

    signal.signal(signal.SIGTERM, pass_on)
    signal.signal(signal.SIGHUP, pass_on)
    codes = []
    for proc, relay in zip(procs, relays, strict=True):
        while True:
            try:
                codes.append(proc.wait())
                break
            except KeyboardInterrupt:  # the children got it too: wait for their clean-up
                continue
        relay.join()
    for (name, _, _), code in zip(TIERS, codes, strict=True):
        print(f"{name} tier: exit {code}" + (" (passed)" if code == 0 else ""))
    if NO_TESTS in codes and set(codes) != {NO_TESTS}:
        codes = [0 if code == NO_TESTS else code for code in codes]
    return next((code for code in codes if code != 0), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
