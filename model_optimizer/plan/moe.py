"""Mixture-of-experts: what memory holds and what one decode step reads.

Memory holds every expert. A decode step at batch size ``b`` reads the weights that are
not routed experts (attention, dense layers, shared experts, routers, embeddings) once, and
of the routed experts only those the batch touches. The model used for that: each token
picks ``k`` of ``E`` experts per MoE layer, uniformly and independently across tokens, so an
expert stays untouched by all ``b`` tokens with probability ``(1 - k/E)^b`` and the expected
number of distinct experts per layer is ``E * (1 - (1 - k/E)^b)``: ``k`` at batch 1, all
``E`` as ``b`` grows. Real routers are skewed (fewer distinct experts), so the read bytes
are an upper estimate at mid batch sizes and the floor stays a floor at batch 1.

Splits per device: tensor parallelism cuts every expert into ``tp`` slices (each device reads
``1/tp`` of each touched expert); expert parallelism (``enable-expert-parallel``) places
``E / n`` whole experts on each device, which on average read the same bytes. Both hold
``1/n`` of the expert weights per device.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MoE:
    """The routing of a mixture-of-experts model, from its config.json."""

    experts: int  # routed experts per MoE layer (E)
    top_k: int  # routed experts per token (k)
    shared: int = 0  # shared experts per layer (always read)

    def distinct(self, batch: int) -> float:
        """Expected distinct routed experts per layer that ``batch`` tokens touch."""
        return self.experts * (1 - (1 - self.top_k / self.experts) ** max(1, batch))

    def touched_share(self, batch: int) -> float:
        """Share of the routed-expert weights one decode step at ``batch`` reads."""
        return self.distinct(batch) / self.experts

    def describe(self) -> str:
        """One line: E, k and shared experts."""
        shared = f" + {self.shared} shared" if self.shared else ""
        return f"{self.experts} routed experts, top-{self.top_k}{shared} per token"


_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
_TOP_K_KEYS = ("num_experts_per_tok", "experts_per_token", "moe_topk", "top_k_experts")


def moe_of(config: dict[str, Any]) -> MoE | None:
    """The :class:`MoE` of a config, or None for a dense model (or a single expert)."""
    experts = next((config[k] for k in _EXPERT_KEYS if isinstance(config.get(k), int)), 0)
    top_k = next((config[k] for k in _TOP_K_KEYS if isinstance(config.get(k), int)), 0)
    if experts <= 1 or top_k < 1:
        return None
    shared = config.get("n_shared_experts") or (1 if config.get("shared_expert_intermediate_size")
                                                else 0)
    return MoE(experts=experts, top_k=min(top_k, experts), shared=int(shared))


def read_bytes(weights: int, expert_weights: int, moe: MoE | None, batch: int) -> float:
    """Weight bytes one decode step reads on one device at ``batch``: everything but the
    routed experts, plus the share of routed-expert bytes the batch touches."""
    if moe is None:
        return float(weights)
    return weights - expert_weights + expert_weights * moe.touched_share(batch)
