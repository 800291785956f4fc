"""The model's layers as vLLM allocates their KV cache: full, sliding-window, MLA and
Mamba layers, read from ``config.json``.

Every rule is vLLM's, from ``vllm/v1/kv_cache_interface.py`` (the KV cache spec of each
layer type):

- ``FullAttentionSpec``: ``2 * num_kv_heads * head_size * dtype`` bytes per token and layer,
  for every token up to ``max_model_len`` (``cdiv(max_model_len, block_size)`` pages).
  KV heads are split over the tensor-parallel ranks (at least one per rank).
- ``MLAAttentionSpec`` (DeepSeek V2/V3, Kimi): one latent "head" of ``kv_lora_rank +
  qk_rope_head_dim`` elements per token and layer, no separate V, the same on every TP rank;
  ``fp8_ds_mla`` stores 656 bytes per token and layer (FlashMLA sparse layout).
- ``SlidingWindowSpec``: a request holds at most ``min(sliding_window - 1 +
  max_num_batched_tokens, max_model_len)`` tokens, plus one block (when the window cuts).
  Only under the hybrid KV cache manager: with ``--disable-hybrid-kv-cache-manager`` a
  model that mixes full and windowed layers allocates its windowed layers in full
  (``FullAttentionSpec`` docstring).
  Which layers are windowed: ``layer_types`` (gpt-oss, Qwen3), Gemma 2's alternation and
  Gemma 3's ``sliding_window_pattern`` (as transformers derives ``layer_types``), else every
  layer when ``sliding_window`` is set (vLLM's ``CacheConfig.sliding_window``: Mistral v0.1,
  Phi-3), except when ``use_sliding_window`` is false (Qwen2).
- ``MambaSpec``: a constant state per request (``page_size_bytes`` once), conv state plus SSM
  state (``MambaStateShapeCalculator``): Mamba-1 (Jamba) ``(d_conv - 1) * d_inner +
  d_inner * d_state`` elements, Mamba-2 ``(d_conv - 1) * (d_inner + 2 * n_groups * d_state)
  + heads * head_dim * d_state``, in the model dtype. vLLM pads the pages of all groups to
  one size; the plan counts the unpadded state.

Attention sinks (gpt-oss) are learned per-head logits: no KV cost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

#: model types whose attention the planner models exactly (others get a stated assumption)
KNOWN_MODEL_TYPES = frozenset({
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma",
    "gemma2", "gemma3", "gemma3_text", "phi3", "gpt_oss", "deepseek_v2", "deepseek_v3",
    "kimi_k2", "jamba", "granite", "olmo2", "olmoe",
})
FP8_DS_MLA_BYTES = 656  # per token and layer (vllm/v1/kv_cache_interface.py MLAAttentionSpec)


@dataclass(frozen=True)
class Attention:
    """How the model's layers hold KV cache and state."""

    num_kv_heads: int
    head_dim: int
    mla_dim: int | None = None  # kv_lora_rank + qk_rope_head_dim for MLA models
    full_layers: int = 0
    windows: tuple[tuple[int, int], ...] = ()  # (sliding window, layers)
    state_layers: int = 0
    state_elements: int = 0  # per state layer and request, before the TP split
    sinks: bool = False
    assumptions: tuple[str, ...] = field(default_factory=tuple)

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention (DeepSeek V2/V3, Kimi)."""
        return self.mla_dim is not None

    @property
    def window_layers(self) -> int:
        """Layers with a sliding window."""
        return sum(count for _, count in self.windows)

    @property
    def attention_layers(self) -> int:
        """Layers that hold a per-token KV cache."""
        return self.full_layers + self.window_layers

    def describe(self) -> str:
        """One line: the layer kinds and their counts."""
        kind = "MLA" if self.is_mla else f"{self.num_kv_heads} KV heads x {self.head_dim}"
        parts = [f"{self.full_layers} full-attention layers ({kind})"]
        parts += [f"{count} sliding-window layers (window {window})"
                  for window, count in self.windows]
        if self.state_layers:
            parts.append(f"{self.state_layers} Mamba layers ({self.state_elements:,} state "
                         "elements each)")
        return ", ".join(parts)


def attention_of(config: dict[str, Any], layers: int, kv_heads: int,
                 head_dim: int) -> Attention:
    """The :class:`Attention` of a config.json (``layers``, ``kv_heads``, ``head_dim`` as the
    shape read them)."""
    model_type = config.get("model_type")
    assumptions = []
    if model_type is not None and model_type not in KNOWN_MODEL_TYPES:
        assumptions.append(
            f"model_type {model_type!r} is not one the planner models: planned as "
            f"{layers} layers of full attention with {kv_heads} KV heads x {head_dim} "
            "(no sliding window, no MLA, no Mamba state unless the config names them)")
    mla = _mla_dim(config)
    kinds = _layer_kinds(config, layers)
    state_elements = _state_elements(config) if "mamba" in kinds else 0
    if "mamba" in kinds and not state_elements:
        assumptions.append("Mamba/linear-attention layers of an unknown layout: their "
                           "per-request state is not planned")
    windows = _windows(config, kinds)
    return Attention(
        num_kv_heads=1 if mla else kv_heads, head_dim=head_dim, mla_dim=mla,
        full_layers=kinds.count("full"), windows=windows,
        state_layers=kinds.count("mamba"), state_elements=state_elements,
        sinks=model_type == "gpt_oss", assumptions=tuple(assumptions))


def _mla_dim(config: dict) -> int | None:
    rank = config.get("kv_lora_rank")
    if not rank:
        return None
    return int(rank) + int(config.get("qk_rope_head_dim") or 0)


def _layer_kinds(config: dict, layers: int) -> list[str]:
    """'full', 'sliding' or 'mamba' per layer."""
    model_type = config.get("model_type")
    if model_type == "jamba":
        period, offset = config.get("attn_layer_period", 8), config.get("attn_layer_offset", 4)
        return ["full" if i % period == offset else "mamba" for i in range(layers)]
    pattern = config.get("hybrid_override_pattern")
    if isinstance(pattern, str) and len(pattern) == layers:  # Nemotron-H: M mamba, * attention
        return ["mamba" if c == "M" else "full" for c in pattern if c in "M*"] or []
    types = config.get("layer_types") or _derived_layer_types(config, layers)
    if types:
        return [{"sliding_attention": "sliding", "mamba": "mamba",
                 "linear_attention": "mamba"}.get(t, "full") for t in types]
    window = config.get("sliding_window")
    if window and config.get("use_sliding_window", True) is not False:
        return ["sliding"] * layers
    return ["full"] * layers


def _derived_layer_types(config: dict, layers: int) -> list[str] | None:
    """Gemma 2 alternates (even layers windowed); Gemma 3 windows all but every
    ``sliding_window_pattern``-th layer (transformers' Gemma2Config/Gemma3TextConfig)."""
    model_type = config.get("model_type")
    if model_type == "gemma2":
        return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]
    if model_type in ("gemma3", "gemma3_text"):
        period = config.get("sliding_window_pattern", 6)
        return ["sliding_attention" if (i + 1) % period else "full_attention"
                for i in range(layers)]
    return None


def _windows(config: dict, kinds: list[str]) -> tuple[tuple[int, int], ...]:
    count = kinds.count("sliding")
    return ((int(config["sliding_window"]), count),) if count else ()


def _state_elements(config: dict) -> int:
    """Conv + SSM state elements of one Mamba layer for one request (0 when unknown)."""
    hidden = config.get("hidden_size", 0)
    if config.get("model_type") == "jamba":
        inner = config.get("mamba_expand", 2) * hidden
        return (config.get("mamba_d_conv", 4) - 1) * inner + inner * config.get("mamba_d_state", 16)
    heads, head_dim = config.get("mamba_num_heads"), config.get("mamba_head_dim")
    state = config.get("ssm_state_size")
    if not (heads and head_dim and state):
        return 0
    inner = heads * head_dim
    conv_dim = inner + 2 * config.get("n_groups", 1) * state
    return (config.get("conv_kernel", 4) - 1) * conv_dim + heads * head_dim * state


def token_bytes(att: Attention, head_bytes: float, tp: int, window_layers: bool = True,
                ds_mla: bool = False) -> int:
    """KV bytes of one token on one device over the full (and, with ``window_layers``, the
    windowed) attention layers. ``head_bytes`` is K+V of one head of ``head_dim``."""
    layers = att.full_layers + (att.window_layers if window_layers else 0)
    if att.is_mla:
        per_layer = FP8_DS_MLA_BYTES if ds_mla else head_bytes / 2 / att.head_dim * att.mla_dim
        return math.ceil(layers * per_layer)
    return math.ceil(layers * max(1, att.num_kv_heads // tp) * head_bytes)


def request_bytes(att: Attention, tokens: int, block: int, step_tokens: int,
                  per_layer_token: float, state_bytes: int, hybrid_manager: bool) -> int:
    """Most KV memory one request of ``tokens`` takes on one device, as vLLM's
    ``max_memory_usage_bytes`` of each layer adds up. ``per_layer_token`` is one layer's
    bytes per token (per device); ``state_bytes`` one Mamba layer's state (per device)."""
    full_pages = math.ceil(tokens / block)
    total = att.full_layers * full_pages * block * per_layer_token
    for window, count in att.windows:
        if hybrid_manager or not att.full_layers:
            held = min(window - 1 + step_tokens, tokens)
            # +1: a window cut from a longer request may start mid-block
            pages = math.ceil(held / block) + (1 if held < tokens else 0)
        else:
            pages = full_pages
        total += count * pages * block * per_layer_token
    return math.ceil(total + att.state_layers * state_bytes)
