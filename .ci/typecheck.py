"""CI's type check: mypy on model_optimizer/ against a baseline that only shrinks.

mypy checks every module (``[tool.mypy]`` in pyproject.toml), with --strict's flags on
``usecase/`` and ``recipe/``. The errors of the other modules, as they were when the check
came in, are listed in ``.mypy-baseline.txt``, one line each, without line numbers (an edit
above an error does not change its entry). This script fails when

- mypy reports an error the baseline does not hold (a new one: annotate it), or
- a baseline entry no longer occurs (fixed: shrink the baseline, so it cannot come back), or
- mypy itself fails (a configuration error, a crash).

    .venv/bin/python .ci/typecheck.py              # the check CI runs
    .venv/bin/python .ci/typecheck.py --shrink     # drop the fixed entries from the baseline
    .venv/bin/python .ci/typecheck.py --regenerate # the baseline from scratch (a moved package)

See docs/design.md section 6 (Testing).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / ".mypy-baseline.txt"
#: the strict modules carry no baseline: every error there fails
STRICT_PREFIXES = ("model_optimizer/usecase/", "model_optimizer/recipe/")
MYPY = [sys.executable, "-m", "mypy", "--no-pretty", "--no-error-summary",
        "--no-color-output", "--show-error-codes", "--hide-error-context"]
SHRINK = ".venv/bin/python .ci/typecheck.py --shrink"
REGENERATE = ".venv/bin/python .ci/typecheck.py --regenerate"
HEADER = f"""\
# mypy's errors outside the strict modules (usecase/, recipe/) when the type check came in.
# .ci/typecheck.py fails on an error not listed here, and on an entry that no longer occurs:
# the list only shrinks. After fixing errors:
#     {SHRINK}
# One line per error, `path: message  [code]`, without line numbers. Regenerate only when a
# package moves, and say so in the commit:
#     {REGENERATE}
"""

_ERROR = re.compile(r"^(?P<path>[^:\n]+\.pyi?):(?P<line>\d+)(?::\d+)?: error: (?P<message>.*)$")
_LINE_IN_MESSAGE = re.compile(r"\bline \d+\b")


@dataclass(frozen=True)
class MypyError:
    """One error line of mypy's output."""

    path: str
    line: int
    message: str  # with its [code]

    @property
    def entry(self) -> str:
        """The baseline's form: no line number, in the path or in the message."""
        return f"{self.path}: {_LINE_IN_MESSAGE.sub('line N', self.message)}"

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: error: {self.message}"


@dataclass
class Verdict:
    """The errors the baseline lacks, and the entries that no longer occur."""

    new: list[MypyError]
    gone: list[str]
    strict: list[str]  # baseline entries in a strict module: refused

    @property
    def ok(self) -> bool:
        return not (self.new or self.gone or self.strict)


def parse(output: str) -> list[MypyError]:
    """The error lines of mypy's output (notes and summaries are skipped)."""
    found = (_ERROR.match(line.strip()) for line in output.splitlines())
    return [MypyError(m["path"].replace("\\", "/"), int(m["line"]), m["message"].strip())
            for m in found if m]


def read_baseline(text: str) -> Counter[str]:
    """The baseline's entries, each as often as it is listed (comments and blanks skipped)."""
    return Counter(line.strip() for line in text.splitlines()
                   if line.strip() and not line.lstrip().startswith("#"))


def baseline_text(entries: Counter[str]) -> str:
    """The baseline file for ``entries``: the header, then the entries sorted."""
    return HEADER + "".join(f"{entry}\n" for entry in sorted(entries.elements()))


def compare(errors: list[MypyError], baseline: Counter[str]) -> Verdict:
    """Which errors are new (more of an entry than the baseline lists: every error of that
    entry is shown, since mypy cannot tell which one is new) and which entries are gone."""
    now = Counter(error.entry for error in errors)
    grown = {entry for entry, count in now.items() if count > baseline[entry]}
    new = [error for error in errors if error.entry in grown]
    gone = sorted((baseline - now).elements())
    strict = sorted(entry for entry in baseline if entry.startswith(STRICT_PREFIXES))
    return Verdict(new, gone, strict)


def report(verdict: Verdict, errors: list[MypyError], baseline: Counter[str]) -> str:
    """What the check prints: the verdict, and the fix for each kind of failure."""
    lines = []
    if verdict.strict:
        lines += [f"the baseline lists {len(verdict.strict)} errors of a strict module "
                  f"({', '.join(STRICT_PREFIXES)}); those must be fixed, not listed:",
                  *(f"  {entry}" for entry in verdict.strict)]
    if verdict.new:
        grown = Counter(error.entry for error in verdict.new)
        lines += [f"mypy: {len(grown)} error(s) not in the baseline ({BASELINE.name}):"]
        for error in verdict.new:
            listed = baseline[error.entry]
            lines.append(f"  {error}" + (f"   ({listed} listed, {grown[error.entry]} now)"
                                         if listed else ""))
        lines += ["Fix: annotate it (or correct the code it found). Only if it truly cannot "
                  f"be fixed now, regenerate the baseline with `{REGENERATE}` and say why in "
                  "the commit."]
    if verdict.gone:
        lines += [f"mypy: {len(verdict.gone)} baseline entr(y/ies) no longer occur: fixed. "
                  f"The baseline only shrinks: run `{SHRINK}` and commit {BASELINE.name}.",
                  *(f"  {entry}" for entry in verdict.gone)]
    if verdict.ok:
        lines.append(f"mypy: {len(errors)} errors, all in the baseline "
                     f"({sum(baseline.values())} entries); the strict modules are clean")
    return "\n".join(lines)


def run_mypy() -> tuple[int, str]:
    """mypy's exit status and output, run from the repository root (its config there)."""
    done = subprocess.run(MYPY, cwd=ROOT, capture_output=True, text=True, check=False)
    return done.returncode, done.stdout + done.stderr


def main(argv: list[str] | None = None) -> int:
    """Run mypy and compare (or rewrite the baseline); 0 when nothing is new or gone."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--shrink", action="store_true",
                      help="drop the entries that no longer occur from the baseline")
    mode.add_argument("--regenerate", action="store_true",
                      help="write every current error as the baseline (a moved package)")
    parser.add_argument("--mypy-output", type=Path,
                        help="compare this saved mypy output instead of running mypy")
    parser.add_argument("--baseline", type=Path, default=BASELINE, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    start = time.monotonic()
    if args.mypy_output is not None:
        output = args.mypy_output.read_text(encoding="utf-8")
        status = 1 if parse(output) else 0
    else:
        status, output = run_mypy()
    errors = parse(output)
    if status not in (0, 1) or (status == 1 and not errors):
        print(f"mypy failed (exit {status}) without a list of errors:\n{output}")
        return 1
    path: Path = args.baseline
    baseline = read_baseline(path.read_text(encoding="utf-8") if path.exists() else "")
    if args.shrink:
        baseline = baseline & Counter(error.entry for error in errors)
        path.write_text(baseline_text(baseline), encoding="utf-8")
    elif args.regenerate:
        baseline = Counter(e.entry for e in errors if not e.path.startswith(STRICT_PREFIXES))
        path.write_text(baseline_text(baseline), encoding="utf-8")
    verdict = compare(errors, baseline)
    print(report(verdict, errors, baseline))
    print(f"(type check in {time.monotonic() - start:.1f} s)")
    return 0 if verdict.ok else 1


if __name__ == "__main__":
    sys.exit(main())
