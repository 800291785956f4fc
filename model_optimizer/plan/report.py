"""The plan's result: :class:`PlanReport` (with its verdict) and :class:`DecodeFloor`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class DecodeFloor:
    """Bandwidth floor of one decode step at a batch size, and the throughput ceiling."""

    label: str
    batch: int
    tpot_floor_ms: float
    tokens_per_s_ceiling: float


@dataclass
class PlanReport:
    """Result of :func:`estimate`. Byte figures are per device unless named otherwise."""

    accelerator: str
    memory_gib: float
    bandwidth_gbps: float
    tensor_parallel_size: int
    param_count: int
    dtype: str
    quantization: str
    weight_bits: float  # nominal bits of a linear-layer weight
    linear_bits_effective: float  # with the group scale/zero overhead
    weight_bytes: int  # all devices together
    weight_bytes_per_device: int
    kv_cache_dtype: str
    kv_bytes_per_token: int  # all devices together
    kv_bytes_per_token_per_device: int
    gpu_memory_utilization: float | None  # None on the CPU engine
    reserve_bytes_per_device: int
    kv_budget_bytes: int  # per device; negative when nothing is left
    block_size: int
    kv_blocks: int
    kv_tokens: int
    max_model_len: int | None  # the recipe's, else the model's max_position_embeddings
    fits_max_model_len: bool | None
    seq_len: int  # workload prompt_tokens + output_tokens
    blocks_per_seq: int
    max_seqs_no_preemption: int
    recipe_max_num_seqs: int
    recipe_max_num_seqs_is_default: bool
    decode_floors: list[DecodeFloor] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    param_source: str = ""  # where param_count came from (transformers, safetensors, arithmetic)
    expert_param_count: int = 0  # routed experts (0 for a dense model)
    moe: str | None = None  # the routing, e.g. "128 routed experts, top-8 per token"
    attention: str = ""  # the layers' KV layout (full, sliding-window, MLA, Mamba)
    expert_bytes_per_device: int = 0
    request_bytes_max_model_len: int = 0  # one max_model_len request's KV, as vLLM checks it

    @property
    def fits(self) -> bool:
        """True when nothing stops vLLM from starting."""
        return not self.problems

    @property
    def verdict(self) -> str:
        """'fits', 'fits with warnings' or 'does not fit'."""
        if self.problems:
            return "does not fit"
        return "fits with warnings" if self.warnings else "fits"

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (JSON-ready), with ``verdict`` added."""
        return {**asdict(self), "verdict": self.verdict}
