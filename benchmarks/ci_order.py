"""The order CI hands the integration modules to its three workers, simulated.

``.ci/run`` runs the integration tier as ``-n 3 --dist loadfile --no-loadscope-reorder``: a
module stays on one worker, modules are handed out in the order of ``FIRST`` in
tests/integration/conftest.py, and pytest-xdist (3.8, ``LoadScopeScheduling``) gives a worker
its next module as soon as two or fewer of its tests are still pending. With one-test modules
a worker so holds two modules at once, and the tier's time is its last worker's: "longest
first" is not the best order. (Without ``--no-loadscope-reorder``, xdist first sorts the
modules by their number of tests, and ``FIRST`` is not followed at all.)

This replays that scheduler on the per-test durations of a CI log (``--durations=0``, or the
slowest 25 that a plain run prints: unlisted tests count ``--default`` seconds), with each
duration varied by +-``--noise`` over ``--samples`` draws, and searches for the order whose
mean finishing time is least. It runs nothing but ``pytest --collect-only``.

    .venv/bin/python benchmarks/ci_order.py /tmp/ci-run.log
"""

from __future__ import annotations

import argparse
import collections
import heapq
import random
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DURATION = re.compile(r"^\s*([\d.]+)s (?:call|setup|teardown)\s+tests/integration/(\w+)\.py::(\S+)")
#: a worker is given its next module once this many of its tests or fewer are pending
#: (pytest-xdist's LoadScopeScheduling._reschedule)
PREFETCH = 2


def collected() -> dict[str, list[str]]:
    """The tier's tests by module, as pytest collects them."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p",
                          "no:cacheprovider", "-m", "integration and not quiet"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    modules: dict[str, list[str]] = {}
    for line in out.splitlines():
        if line.startswith("tests/integration/") and "::" in line:
            path, name = line.split("::", 1)
            modules.setdefault(Path(path).stem, []).append(name)
    return modules


def durations(log: str, modules: dict[str, list[str]], default: float) -> dict[str, list[float]]:
    """Each module's tests' durations (setup, call and teardown summed), in collection order."""
    seen: dict[tuple[str, str], float] = collections.defaultdict(float)
    for line in log.splitlines():
        if match := DURATION.match(line):
            seen[(match[2], match[3])] += float(match[1])
    return {module: [seen.get((module, test), default) for test in tests]
            for module, tests in modules.items()}


def finish(tests: dict[str, list[float]], order: list[str], workers: int = 3) -> float:
    """When the last worker is done, handing ``order``'s modules out as xdist does."""
    queue = collections.deque(order)
    pending: dict[int, collections.deque] = {w: collections.deque() for w in range(workers)}

    def give(worker: int) -> None:
        pending[worker].extend(tests[queue.popleft()])

    for worker in range(workers):
        if queue:
            give(worker)
    for worker in range(workers):
        if queue and len(pending[worker]) <= PREFETCH:
            give(worker)
    events = [(pending[w][0], w) for w in range(workers) if pending[w]]
    heapq.heapify(events)
    end = 0.0
    while events:
        now, worker = heapq.heappop(events)
        end = max(end, now)
        pending[worker].popleft()
        if queue and len(pending[worker]) <= PREFETCH:
            give(worker)
        if pending[worker]:
            heapq.heappush(events, (now + pending[worker][0], worker))
    return end


def by_count(order: list[str], tests: dict[str, list[float]]) -> list[str]:
    """xdist's reorder (the default without --no-loadscope-reorder): most tests first."""
    return sorted(order, key=lambda module: -len(tests[module]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="a CI log with pytest's durations")
    parser.add_argument("--default", type=float, default=10.0,
                        help="seconds of a test the log does not list")
    parser.add_argument("--noise", type=float, default=0.2)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from tests.integration.conftest import FIRST

    tests = durations(args.log.read_text(), collected(), args.default)
    rng = random.Random(args.seed)
    draws = [{m: [d * rng.uniform(1 - args.noise, 1 + args.noise) for d in ds]
              for m, ds in tests.items()} for _ in range(args.samples)]

    def mean_finish(order: list[str]) -> float:
        return sum(finish(draw, order) for draw in draws) / len(draws)

    listed = [m for m in FIRST if m in tests] + sorted(m for m in tests if m not in FIRST)
    total = sum(map(sum, tests.values()))
    print(f"{len(tests)} modules, {total:.0f} s of tests: {total / 3:.0f} s a worker at best")
    reordered = mean_finish(by_count(listed, tests))
    print(f"FIRST, reordered by test count (xdist's default): {reordered:.0f} s")
    print(f"FIRST as written (--no-loadscope-reorder):        {mean_finish(listed):.0f} s")
    best = sorted(tests, key=lambda m: -sum(tests[m]))
    score = mean_finish(best)
    for _ in range(args.steps):
        order = best[:]
        i, j = rng.sample(range(len(order)), 2)
        order[i], order[j] = order[j], order[i]
        if (candidate := mean_finish(order)) < score:
            best, score = order, candidate
    print(f"searched from longest first:                      {score:.0f} s")
    print("FIRST = (" + ", ".join(f'"{m}"' for m in best) + ")")


if __name__ == "__main__":
    main()
