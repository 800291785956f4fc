"""The model's shape, read from its Hugging Face ``config.json``, and its parameter counts.

Parameters come from ``transformers`` on the meta device (:mod:`param_count`) when it can
build the config, else from the Llama arithmetic below (Mistral and Qwen2 share it; MoE
experts added when the config names them), and the breakdown says which. The layers' KV
layout is :mod:`architecture`'s, the routing :mod:`moe`'s.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from model_optimizer.plan.accelerators import PlanError
from model_optimizer.plan.architecture import Attention, attention_of
from model_optimizer.plan.moe import MoE, moe_of
from model_optimizer.plan.param_count import ParamBreakdown, count_parameters

REQUIRED_CONFIG_FIELDS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "vocab_size",
    "intermediate_size",
)

#: (lowest, highest) of every whole number the planner reads from a config.json (here, in
#: architecture and moe, and transformers' meta-device count), far beyond any published
#: model: a hostile ``num_hidden_layers: 1000000000`` would otherwise build a list (or a
#: meta model) of a billion layers before anything is checked.
CONFIG_LIMITS: dict[str, tuple[int, int]] = {
    "num_hidden_layers": (1, 4096), "hidden_size": (1, 1 << 18),
    "intermediate_size": (1, 1 << 21), "moe_intermediate_size": (1, 1 << 21),
    "shared_expert_intermediate_size": (0, 1 << 21), "num_attention_heads": (1, 1 << 14),
    "num_key_value_heads": (1, 1 << 14), "head_dim": (1, 1 << 14),
    "vocab_size": (1, 1 << 24), "max_position_embeddings": (1, 1 << 30),
    "sliding_window": (0, 1 << 30), "sliding_window_pattern": (1, 4096),
    "attn_layer_period": (1, 4096), "attn_layer_offset": (0, 4096),
    "kv_lora_rank": (0, 1 << 16), "qk_rope_head_dim": (0, 1 << 16),
    "num_local_experts": (0, 1 << 16), "num_experts": (0, 1 << 16),
    "n_routed_experts": (0, 1 << 16), "moe_num_experts": (0, 1 << 16),
    "num_experts_per_tok": (0, 1 << 16), "experts_per_token": (0, 1 << 16),
    "moe_topk": (0, 1 << 16), "top_k_experts": (0, 1 << 16), "n_shared_experts": (0, 1 << 16),
    "mamba_expand": (1, 1 << 10), "mamba_d_conv": (1, 1 << 10), "mamba_d_state": (1, 1 << 16),
    "mamba_num_heads": (1, 1 << 16), "mamba_head_dim": (1, 1 << 16),
    "ssm_state_size": (1, 1 << 16), "n_groups": (1, 1 << 16), "conv_kernel": (1, 1 << 10),
}


def check_sizes(config: dict, source: str) -> None:
    """PlanError naming ``source`` and the field when a number in ``CONFIG_LIMITS`` is out
    of its range (or not finite); fields the config leaves out or sets to null pass."""
    for name, (low, high) in CONFIG_LIMITS.items():
        value = config.get(name)
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if not (math.isfinite(value) and low <= value <= high):
            shown = f"{value:.3g}" if isinstance(value, float) or abs(value) > 10**12 else value
            raise PlanError(f"{source}: {name} is {shown}, outside {low}..{high:,}: no model "
                            "has that; check the file (a damaged or hostile config.json)")


@dataclass(frozen=True)
class ModelShape:
    """The shape of a Llama-architecture model, read from its Hugging Face config.json."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    intermediate_size: int
    tie_word_embeddings: bool = False
    torch_dtype: str | None = None
    max_position_embeddings: int | None = None
    has_rope_scaling: bool = False
    qkv_bias: bool = False  # Qwen2 always, others when config.attention_bias
    model_type: str | None = None
    attention: Attention | None = None
    moe: MoE | None = None
    counted: ParamBreakdown | None = None  # from transformers; None: the arithmetic below
    moe_intermediate_size: int | None = None  # an expert's MLP width when it differs

    @classmethod
    def from_config(cls, config: Any, source: str = "model config") -> ModelShape:
        """Build the shape from a config dict; PlanError naming ``source`` when it is unusable."""
        if not isinstance(config, dict):
            raise PlanError(f"{source}: expected a JSON object, got {type(config).__name__}")
        missing = [name for name in REQUIRED_CONFIG_FIELDS if config.get(name) is None]
        if missing:
            raise PlanError(f"{source}: missing field(s) {', '.join(missing)}")
        check_sizes(config, source)
        sizes = {name: _positive_int(config, name, source) for name in REQUIRED_CONFIG_FIELDS}
        heads = sizes["num_attention_heads"]
        kv_heads = _optional_int(config, "num_key_value_heads", source) or heads
        head_dim = _head_dim(config, sizes["hidden_size"], heads, source)
        return cls(
            num_layers=sizes["num_hidden_layers"],
            hidden_size=sizes["hidden_size"],
            num_attention_heads=heads,
            num_kv_heads=kv_heads,
            head_dim=head_dim,
            vocab_size=sizes["vocab_size"],
            intermediate_size=sizes["intermediate_size"],
            tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
            torch_dtype=config.get("torch_dtype") or config.get("dtype"),
            max_position_embeddings=_optional_int(config, "max_position_embeddings", source),
            has_rope_scaling=bool(config.get("rope_scaling")),
            qkv_bias=bool(config.get("attention_bias")) or config.get("model_type") == "qwen2",
            model_type=config.get("model_type"),
            attention=attention_of(config, sizes["num_hidden_layers"], kv_heads, head_dim),
            moe=moe_of(config),
            counted=count_parameters(config),
            moe_intermediate_size=_optional_int(config, "moe_intermediate_size", source),
        )

    @property
    def layout(self) -> Attention:
        """The KV layout: the config's, else every layer full attention."""
        return self.attention or Attention(self.num_kv_heads, self.head_dim,
                                           full_layers=self.num_layers)

    @property
    def breakdown(self) -> ParamBreakdown:
        """Parameters by class: transformers' count, else the Llama arithmetic."""
        if self.counted is not None:
            return self.counted
        experts = 0
        if self.moe is not None:  # every MLP a routed MoE (+ shared experts, as routed ones)
            width = self.moe_intermediate_size or self.intermediate_size
            experts = (self.moe.experts + self.moe.shared) * 3 * self.hidden_size * width
            experts *= self.num_layers
        return ParamBreakdown(
            embedding=self._embedding_arithmetic,
            linear=self._linear_arithmetic - (self._mlp_arithmetic if experts else 0),
            expert=experts, shared_expert=0,
            router=self.num_layers * self.hidden_size * self.moe.experts if self.moe else 0,
            vision=0, other=self._norm_arithmetic + self._bias_arithmetic,
            source="arithmetic (Llama layout" + (", every MLP a MoE"
                                                 if experts else "") + "; approximate)")

    @property
    def linear_params(self) -> int:
        """Weights of the quantizable linear layers: attention, MLP, shared and routed
        experts (everything of two or more dimensions but embeddings, routers, towers)."""
        b = self.breakdown
        return b.linear + b.shared_expert + b.expert

    @property
    def expert_params(self) -> int:
        """Weights of the routed experts (0 for a dense model)."""
        return self.breakdown.expert

    @property
    def embedding_params(self) -> int:
        """Token embeddings plus the lm_head (once when tied)."""
        return self.breakdown.embedding

    @property
    def norm_params(self) -> int:
        """Norms, biases, routers, convolutions and vision towers: kept in the dtype."""
        b = self.breakdown
        return b.other + b.router + b.vision

    @property
    def bias_params(self) -> int:
        """Counted in :attr:`norm_params` (kept for callers that add the two)."""
        return 0

    @property
    def param_count(self) -> int:
        """All parameters of the model."""
        return self.breakdown.total

    @property
    def _mlp_arithmetic(self) -> int:
        return self.num_layers * 3 * self.hidden_size * self.intermediate_size

    @property
    def _linear_arithmetic(self) -> int:
        """Weights of all q, k, v, o and MLP gate/up/down projections."""
        q_out = self.num_attention_heads * self.head_dim
        kv_out = self.num_kv_heads * self.head_dim
        attention = self.hidden_size * (2 * q_out + 2 * kv_out)  # q and o; k and v
        mlp = 3 * self.hidden_size * self.intermediate_size
        return self.num_layers * (attention + mlp)

    @property
    def _embedding_arithmetic(self) -> int:
        """Token embeddings plus the lm_head (unless tied to the embeddings)."""
        tables = 1 if self.tie_word_embeddings else 2
        return tables * self.vocab_size * self.hidden_size

    @property
    def _norm_arithmetic(self) -> int:
        """Two RMSNorm weight vectors per layer and the final norm."""
        return (2 * self.num_layers + 1) * self.hidden_size

    @property
    def _bias_arithmetic(self) -> int:
        """q, k and v projection biases (Qwen2, ``attention_bias``); kept in the dtype."""
        if not self.qkv_bias:
            return 0
        return self.num_layers * (self.num_attention_heads + 2 * self.num_kv_heads) * self.head_dim


def _positive_int(config: dict, name: str, source: str) -> int:
    value = config.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise PlanError(f"{source}: {name} must be a positive integer, got {value!r}")
    return value


def _optional_int(config: dict, name: str, source: str) -> int | None:
    return None if config.get(name) is None else _positive_int(config, name, source)


def _head_dim(config: dict, hidden: int, heads: int, source: str) -> int:
    explicit = _optional_int(config, "head_dim", source)
    if explicit is not None:
        return explicit
    if hidden % heads:
        raise PlanError(
            f"{source}: hidden_size {hidden} is not a multiple of "
            f"num_attention_heads {heads} and head_dim is not given"
        )
    return hidden // heads


def load_model_config(path: str | Path) -> dict[str, Any]:
    """Read a Hugging Face ``config.json`` (the file, or a model folder holding it).

    Raises PlanError naming the file when it is missing, is not valid JSON, or lacks the
    fields the planner needs.
    """
    file = Path(path)
    if file.is_dir():
        file = file / "config.json"
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanError(f"{file}: no such file (give a config.json or a model folder)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError(f"{file}: cannot read: {exc}") from None
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanError(f"{file}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    ModelShape.from_config(config, source=str(file))
    return config
