"""Parameter counts that cannot drift from the model code: the installed ``transformers``
builds the model from its config on the ``meta`` device (no memory, no weights, no
download) and every parameter is classified by the module that holds it.

Classes (:class:`ParamBreakdown`): ``embedding`` (token embeddings and the lm_head),
``expert`` (routed experts: parameters under an ``experts`` module), ``shared_expert``
(``shared_expert(s)``), ``linear`` (every other weight of two or more dimensions: attention,
dense MLP, Mamba projections), ``router`` (MoE gates), ``vision`` (vision/audio towers and
their projectors) and ``other`` (norms, biases, 1-D and convolution parameters).

A config ``transformers`` cannot build (an unknown ``model_type``, a remote-code model, no
transformers installed) gets ``None``: the caller falls back to arithmetic and says so.
Counts are cached per config (SHA-256 of the canonical JSON and the transformers version)
in memory and under ``$MOPT_CACHE_DIR/param-counts`` (default ``~/.cache/mopt``): a big MoE
config is built once, then read back in milliseconds.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

_VISION = ("vision", "visual", "audio", "multi_modal_projector", "mm_projector")
#: config keys that are metadata, not shape (dropped before building)
_DROP = ("auto_map", "quantization_config", "architectures", "transformers_version",
         "_name_or_path", "torch_dtype", "dtype")


@dataclass(frozen=True)
class ParamBreakdown:
    """Parameters of one model by class; ``source`` says where the figures came from."""

    embedding: int
    linear: int
    expert: int
    shared_expert: int
    router: int
    vision: int
    other: int
    source: str
    seconds: float = 0.0  # how long building the meta model took (0 when cached)

    @property
    def total(self) -> int:
        """All parameters."""
        return (self.embedding + self.linear + self.expert + self.shared_expert
                + self.router + self.vision + self.other)


def _classify(name: str, param: Any, embedding_ids: set[int]) -> str:
    parts = name.split(".")
    if any(v in name for v in _VISION):
        return "vision"
    if id(param) in embedding_ids:
        return "embedding"
    if "shared_expert" in name or "shared_experts" in parts:
        return "shared_expert" if param.dim() >= 2 and not name.endswith("bias") else "other"
    if "experts" in parts:
        return "expert" if not name.endswith("bias") else "other"
    if "router" in parts or parts[-2:] == ["gate", "weight"]:
        return "router"
    if param.dim() >= 2 and not name.endswith("bias") and "conv" not in name:
        return "linear"
    return "other"


def _build_counts(config: dict[str, Any]) -> ParamBreakdown | None:
    try:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM
    except ImportError:
        return None
    fields = {k: v for k, v in config.items() if k not in _DROP and k != "model_type"}
    started = time.perf_counter()
    try:
        hf_config = AutoConfig.for_model(config["model_type"], **fields)
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(hf_config)
    except Exception:  # noqa: BLE001 - any failure means "cannot build": arithmetic instead
        return None
    embedding_ids = {id(p) for m in (model.get_input_embeddings(),
                                     model.get_output_embeddings()) if m is not None
                     for p in m.parameters()}
    counts = dict.fromkeys(("embedding", "linear", "expert", "shared_expert", "router",
                            "vision", "other"), 0)
    for name, param in model.named_parameters():  # tied parameters are listed once
        counts[_classify(name, param, embedding_ids)] += param.numel()
    import transformers

    return ParamBreakdown(**counts, source=f"transformers {transformers.__version__} "
                          f"{type(model).__name__} on the meta device",
                          seconds=time.perf_counter() - started)


def _cache_key(config: dict[str, Any]) -> str:
    try:
        from importlib.metadata import version

        tf_version = version("transformers")
    except Exception:  # noqa: BLE001 - not installed: the key still works, counts are None
        tf_version = "none"
    text = json.dumps(config, sort_keys=True, default=str) + tf_version
    return hashlib.sha256(text.encode()).hexdigest()


def _cache_file(key: str) -> Path:
    base = os.environ.get("MOPT_CACHE_DIR") or Path.home() / ".cache" / "mopt"
    return Path(base) / "param-counts" / f"{key}.json"


@lru_cache(maxsize=64)
def _counts_for(key: str, config_json: str) -> ParamBreakdown | None:
    file = _cache_file(key)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        return ParamBreakdown(**{**data, "seconds": 0.0})
    except (OSError, ValueError, TypeError):
        pass
    found = _build_counts(json.loads(config_json))
    if found is not None:
        try:
            file.parent.mkdir(parents=True, exist_ok=True)
            file.write_text(json.dumps(asdict(found)), encoding="utf-8")
        except OSError:
            pass  # a read-only home: counted again next time
    return found


def count_parameters(config: dict[str, Any]) -> ParamBreakdown | None:
    """The model's parameters by class from ``transformers`` on the meta device, or None
    when it cannot build this config (no ``model_type``, unknown to transformers, ...)."""
    if not isinstance(config.get("model_type"), str):
        return None
    text = json.dumps(config, sort_keys=True, default=str)
    return _counts_for(_cache_key(config), text)
