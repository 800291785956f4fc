"""Render an HTML file in a real headless browser (Debian's chromium-headless-shell, which
`.ci/run` installs through examples/setup-browser.sh): the DOM after rendering, the console
errors, and a screenshot kept as a test artifact under test-artifacts/."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser")
CONSOLE_ERROR = re.compile(r"CONSOLE.*(error|Uncaught)|Failed to load resource|"
                           r"Refused to (load|execute)", re.IGNORECASE)


@dataclass
class Rendered:
    """What the browser made of the page."""

    dom: str
    console_errors: list[str]
    screenshot: Path


def _browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("no headless Chromium: run `bash examples/setup-browser.sh` (Debian's "
                "chromium-headless-shell)")


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([_browser(), "--headless", "--no-sandbox", "--disable-gpu",
                           "--no-first-run", "--enable-logging=stderr", "--v=0", *args],
                          capture_output=True, text=True, timeout=90)


def render(page: Path, name: str) -> Rendered:
    """Load ``page`` (a local file) in the browser; the screenshot goes to
    test-artifacts/<name>.png."""
    uri = page.resolve().as_uri()
    dumped = _run(["--dump-dom", uri])
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / f"{name}.png"
    shot.unlink(missing_ok=True)
    taken = _run([f"--screenshot={shot}", "--window-size=1000,1600", uri])
    assert taken.returncode == 0 and shot.is_file(), taken.stderr[-2000:]
    errors = [line for line in (dumped.stderr + taken.stderr).splitlines()
              if CONSOLE_ERROR.search(line)]
    return Rendered(dumped.stdout, errors, shot)
