"""Host memory of a real process tree, and the hardware description."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import psutil
import pytest

from model_optimizer.telemetry.memory import (
    NvmlProbe,
    cpu_model_name,
    hardware_seen,
    process_tree_pids,
    process_tree_rss,
)

# The child starts a grandchild that holds ~40 MB, prints its PID, and both sleep.
_PARENT_CODE = """
import subprocess, sys, time
grandchild = subprocess.Popen(
    [sys.executable, "-c", "import time; ballast = bytearray(40 * 2**20); time.sleep(60)"]
)
print(grandchild.pid, flush=True)
time.sleep(60)
"""


def _wait_until(condition, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return False


def _grandchild_ready(grandchild_pid: int) -> bool:
    """True once the grandchild has touched its ballast (RSS above 40 MB)."""
    try:
        return psutil.Process(grandchild_pid).memory_info().rss > 40 * 2**20
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def process_tree() -> Iterator[tuple[subprocess.Popen, int]]:
    """A child python process with one grandchild; both ended (by PID) afterwards."""
    child = subprocess.Popen(
        [sys.executable, "-c", _PARENT_CODE], stdout=subprocess.PIPE, text=True
    )
    grandchild_pid = int(child.stdout.readline())
    try:
        assert _wait_until(lambda: _grandchild_ready(grandchild_pid))
        yield child, grandchild_pid
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            psutil.Process(grandchild_pid).kill()
        child.kill()
        child.wait(10)
        child.stdout.close()


def test_tree_rss_counts_the_grandchild(process_tree) -> None:
    child, grandchild_pid = process_tree
    child_only_rss = psutil.Process(child.pid).memory_info().rss
    tree_rss = process_tree_rss(child.pid)
    assert tree_rss is not None
    assert tree_rss > child_only_rss + 40 * 2**20 * 0.9
    assert process_tree_pids(child.pid) == {child.pid, grandchild_pid}


def test_tree_rss_is_none_after_exit(process_tree) -> None:
    child, grandchild_pid = process_tree
    psutil.Process(grandchild_pid).kill()
    child.kill()
    child.wait(10)
    assert process_tree_rss(child.pid) is None
    assert process_tree_pids(child.pid) == set()


def test_zombie_counts_as_gone() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        assert _wait_until(lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE)
        assert process_tree_rss(child.pid) is None
    finally:
        child.wait(10)


def test_own_process_rss_is_positive() -> None:
    rss_bytes = process_tree_rss(os.getpid())
    assert rss_bytes is not None and rss_bytes > 0


def test_descendant_vanishing_mid_walk_is_skipped(monkeypatch) -> None:
    """A child that disappears between listing and reading its memory is left out."""

    class VanishedChild:
        pid = 2**22 + 1

        def memory_info(self):
            raise psutil.NoSuchProcess(self.pid)

    real_children = psutil.Process.children
    monkeypatch.setattr(
        psutil.Process,
        "children",
        lambda self, recursive=False: [*real_children(self, recursive), VanishedChild()],
    )
    own_rss = psutil.Process().memory_info().rss
    assert process_tree_rss(os.getpid()) == pytest.approx(own_rss, rel=0.2)


def test_hardware_seen_describes_this_machine() -> None:
    seen = hardware_seen()
    assert seen["cpu_count_logical"] >= 1
    assert seen["cpu_count_usable"] >= 1
    assert seen["memory_total_bytes"] > 0
    assert isinstance(seen["cpu_model"], str)
    assert isinstance(seen["platform"], str)
    if not NvmlProbe().available():
        assert seen["accelerator"] == "cpu"
        assert seen["gpus"] == []
        assert seen["gpu_driver_version"] is None
        assert seen["cuda_driver_version"] is None


def test_cpu_model_name_is_text() -> None:
    assert isinstance(cpu_model_name(), str)
