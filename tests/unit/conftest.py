"""Fixtures for every unit test."""

from __future__ import annotations

import os

import pytest

#: what the unit tests see unless marked ``real_cpu``: an x86 CPU on which vLLM's CPU engine
#: runs every kernel mopt plans for (its AVX-512 build)
AVX512_FLAGS = "fpu sse sse2 avx avx2 avx512f avx512bw"
#: an x86 CPU with AVX2 only (this project's AMD EPYC): no W4A16 kernel, no fp8 KV cache
AVX2_FLAGS = "fpu sse2 avx avx2"


def fake_cpu(folder, monkeypatch, flags: str) -> None:
    """Make /proc/cpuinfo, as mopt reads it, list ``flags``."""
    path = folder / f"cpuinfo-{abs(hash(flags))}"
    if not path.exists():
        path.write_text(f"processor\t: 0\nflags\t\t: {flags}\n")
    monkeypatch.setattr("model_optimizer.telemetry.memory.CPUINFO_PATH", str(path))


@pytest.fixture
def cpu_flags_are(tmp_path, monkeypatch):
    """``cpu_flags_are("fpu sse2 avx2")``: the test's CPU has exactly these flags."""
    return lambda flags: fake_cpu(tmp_path, monkeypatch, flags)


@pytest.fixture(autouse=True)
def an_avx512_cpu(request, tmp_path_factory, monkeypatch):
    """The unit tests' outcome never depends on the host's instruction set: they see an
    AVX-512 x86 CPU. The rules for a CPU without it (an fp8 KV cache, W4A16 weights) are
    tested with explicit flags; ``real_cpu`` tests read the host's /proc/cpuinfo."""
    if request.node.get_closest_marker("real_cpu"):
        return
    fake_cpu(tmp_path_factory.getbasetemp(), monkeypatch, AVX512_FLAGS)


@pytest.fixture(autouse=True)
def the_mock_recipe_secret_is_set(monkeypatch):
    """The mock recipe (``tests/unit/mock_engine.py``) reads ``${MOPT_TEST_SECRET_TOKEN}``,
    and mopt refuses to launch while a reference is unset: every unit test has a value
    unless it sets its own (or deletes it to test that refusal)."""
    if not os.environ.get("MOPT_TEST_SECRET_TOKEN"):
        monkeypatch.setenv("MOPT_TEST_SECRET_TOKEN", "unit-test-secret-value")
