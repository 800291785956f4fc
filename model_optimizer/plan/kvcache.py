"""Bytes of one token's KV cache for every ``kv_cache_dtype`` the recipe schema accepts.

Pure arithmetic, from vLLM 0.32's own page layouts (``vllm/v1/attention/backends``):

- ``auto`` follows the model dtype; ``bfloat16``/``float16`` are 2 bytes per element;
  ``fp8``, ``fp8_e4m3``, ``fp8_e5m2``, ``fp8_inc`` and ``fp8_ds_mla`` are 1 byte (a
  per-tensor scale, negligible).
- The per-token-head modes (Triton backend) store, per token and KV head, the K and V data
  plus one fp32 scale each: ``int8_per_token_head`` and ``fp8_per_token_head`` 1 byte per
  element + 8 bytes; ``int4_per_token_head`` half a byte per element (packed pairs) + 8 bytes.
- ``nvfp4`` (FlashInfer) packs two 4-bit values per byte plus an fp8 scale per 16 elements:
  ``head_dim / 2 + head_dim / 16`` bytes per head for K, the same for V.

Which engine accepts which dtype is also vLLM's: the CPU attention backend lists ``auto``,
``fp8``, ``fp8_e4m3`` and ``fp8_e5m2`` only; the others need a GPU backend (Triton for the
per-token-head modes, FlashInfer on Blackwell for ``nvfp4``, MLA models for ``fp8_ds_mla``,
Intel Gaudi for ``fp8_inc``).
"""

from __future__ import annotations

from dataclasses import dataclass

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
FP32_SCALE_BYTES = 4

CPU_KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
"""What vLLM 0.32's CPU attention backend accepts (``CPUAttentionBackend``)."""
#: CPU flags (/proc/cpuinfo) of which vLLM 0.32's CPU attention needs one for an fp8 KV
#: cache, whatever the model's dtype: its ISA choice raises "FP8 KV cache on CPU requires x86
#: with AVX-512 or AMX" when torch sees neither (vllm/v1/attention/backends/cpu_attn.py,
#: ``_get_attn_isa``). Seen on this project's AMD EPYC (AVX2 only) with a bfloat16 and with a
#: float32 model (docs/benchmarks/quality-gate.md).
CPU_FP8_KV_FLAGS = ("avx512f", "amx_tile")


@dataclass(frozen=True)
class KVDtype:
    """How one ``kv_cache_dtype`` stores a head's K and V for one token."""

    name: str
    element_bytes: float | None  # None: the model dtype's (``auto``)
    scale_bytes_per_head: int = 0  # K and V scales together, per token and KV head
    packed_extra_per_element: float = 0.0  # block scales spread over the elements
    needs: str = ""  # what it runs on, when not every backend takes it

    def head_bytes(self, head_dim: int, model_dtype: str) -> float:
        """K plus V bytes of one token for one KV head."""
        element = (
            DTYPE_BYTES[model_dtype] if self.element_bytes is None else self.element_bytes
        )
        per_side = head_dim * (element + self.packed_extra_per_element)
        return 2 * per_side + self.scale_bytes_per_head


_PER_TOKEN_HEAD = "a GPU (vLLM's Triton attention backend)"
KV_DTYPES: dict[str, KVDtype] = {
    kv.name: kv
    for kv in (
        KVDtype("auto", None),
        KVDtype("bfloat16", 2),
        KVDtype("float16", 2),
        KVDtype("fp8", 1),
        KVDtype("fp8_e4m3", 1),
        KVDtype("fp8_e5m2", 1),
        KVDtype("fp8_inc", 1, needs="Intel Gaudi (HPU)"),
        KVDtype("fp8_ds_mla", 1, needs="a GPU and an MLA model (DeepSeek)"),
        KVDtype("fp8_per_token_head", 1, 2 * FP32_SCALE_BYTES, needs=_PER_TOKEN_HEAD),
        KVDtype("int8_per_token_head", 1, 2 * FP32_SCALE_BYTES, needs=_PER_TOKEN_HEAD),
        KVDtype("int4_per_token_head", 0.5, 2 * FP32_SCALE_BYTES, needs=_PER_TOKEN_HEAD),
        # 4-bit data + one fp8 scale byte per 16 elements
        KVDtype("nvfp4", 0.5, packed_extra_per_element=1 / 16,
                needs="an NVIDIA Blackwell GPU (FlashInfer)"),
    )
}


def kv_dtype(name: str) -> KVDtype:
    """The storage rule of ``name``; ValueError for a dtype the planner does not know."""
    try:
        return KV_DTYPES[name]
    except KeyError:
        known = ", ".join(KV_DTYPES)
        raise ValueError(f"kv_cache_dtype {name!r} is not planned (known: {known})") from None


def runs_on_cpu(name: str) -> bool:
    """True when vLLM's CPU engine accepts this ``kv_cache_dtype``."""
    return name in CPU_KV_CACHE_DTYPES


def cpu_kv_dtype_problem(name: str, cpu_flags: frozenset[str]) -> str | None:
    """Why this CPU cannot hold a ``kv_cache_dtype`` that vLLM's CPU engine otherwise takes
    (an fp8 cache without AVX-512 or AMX), None when it can."""
    if not name.startswith("fp8") or cpu_flags & set(CPU_FP8_KV_FLAGS):
        return None
    return (f"kv_cache_dtype {name} on vLLM's CPU engine needs AVX-512 or AMX, and this CPU "
            "has neither (vLLM would stop at start: 'FP8 KV cache on CPU requires x86 with "
            "AVX-512 or AMX')")


def kv_dtype_verdict(name: str, on_cpu: bool) -> tuple[str | None, str | None]:
    """(problem, note) for the plan: a GPU-only dtype on the CPU engine is a problem."""
    needs = kv_dtype(name).needs
    if on_cpu and not runs_on_cpu(name):
        return (f"kv_cache_dtype {name} is GPU-only{': it needs ' + needs if needs else ''}; "
                f"vLLM's CPU engine takes {', '.join(CPU_KV_CACHE_DTYPES)}"), None
    if needs and not on_cpu:
        return None, f"kv_cache_dtype {name} needs {needs}"
    return None, None
