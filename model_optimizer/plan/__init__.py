"""The plan stage: memory and bandwidth arithmetic for a recipe, without a GPU or vLLM.

``estimate(recipe, model_config)`` turns a resolved recipe and a model's ``config.json``
into a :class:`PlanReport`; ``fits`` is the quick yes/no a sweep needs.
"""

from model_optimizer.plan.accelerators import (
    ACCELERATORS,
    Accelerator,
    PlanError,
    resolve_hardware,
    vllm_default_max_num_seqs,
)
from model_optimizer.plan.estimate import (
    GPU_RESERVE_GIB,
    QUANT_RULES,
    DecodeFloor,
    ModelShape,
    PlanReport,
    estimate,
    fits,
    kv_bytes_per_token,
    load_model_config,
)

__all__ = [
    "ACCELERATORS",
    "GPU_RESERVE_GIB",
    "QUANT_RULES",
    "Accelerator",
    "DecodeFloor",
    "ModelShape",
    "PlanError",
    "PlanReport",
    "estimate",
    "fits",
    "kv_bytes_per_token",
    "load_model_config",
    "resolve_hardware",
    "vllm_default_max_num_seqs",
]
