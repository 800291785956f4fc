"""Fixtures for every unit test."""

from __future__ import annotations

import pytest

#: what the unit tests see unless marked ``real_cpu``: an x86 CPU on which vLLM's CPU engine
#: runs every kernel mopt plans for (its AVX-512 build)
AVX512_CPUINFO = "processor\t: 0\nflags\t\t: fpu sse sse2 avx avx2 avx512f avx512bw\n"


@pytest.fixture(autouse=True)
def an_avx512_cpu(request, tmp_path_factory, monkeypatch):
    """The unit tests' outcome never depends on the host's instruction set: they see an
    AVX-512 x86 CPU. The rules for a CPU without it (an fp8 KV cache, W4A16 weights) are
    tested with explicit flags; ``real_cpu`` tests read the host's /proc/cpuinfo."""
    if request.node.get_closest_marker("real_cpu"):
        return
    path = tmp_path_factory.getbasetemp() / "cpuinfo-avx512"
    if not path.exists():
        path.write_text(AVX512_CPUINFO)
    monkeypatch.setattr("model_optimizer.telemetry.memory.CPUINFO_PATH", str(path))
