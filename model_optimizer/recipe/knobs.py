"""The engine-knob table: every recipe field that becomes a vLLM server flag, once.

Each row says which recipe field it is, the vLLM long flag it renders to, its type, whether
a sweep or tune may vary it (numerically or as categories), whether a change needs a new
server, and whether it means anything on a CPU. Rendering (``render.engine_options``), the
first-class flag check (``rules.FIRST_CLASS_FLAGS``) and the knob lists of sweeps and tunes
(``rules.NUMERIC_KNOBS``, ``CATEGORICAL_KNOBS``, ``FLOAT_KNOBS``) derive from it; a test
holds every flag against vLLM's parser (``vllm_flags.KNOWN_FLAGS``).

Adding an engine field: a row here, the schema property, the value in ``render`` if it is
not the field as written (docs/design.md, "Add an engine field").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Knob:
    """One recipe field and the vLLM flag it becomes."""

    field: str  # dotted recipe path: "engine.max_num_seqs"
    flag: str  # vLLM long flag without dashes: "max-num-seqs"
    kind: str  # "int", "float", "bool" or "str"
    sweep: str | None = None  # "numeric", "categorical", or None: not searchable
    restart: bool = True  # vLLM reads its flags at start: a change needs a new server
    gpu_only: bool = False  # left out of a CPU server's command line
    exclusive: bool = True  # extra_args may not set the flag (False: they share it)

    @property
    def name(self) -> str:
        """The field's last part: ``max_num_seqs``."""
        return self.field.rsplit(".", 1)[1]


#: in the order they appear on the command line
KNOBS: tuple[Knob, ...] = (
    Knob("model.path", "model", "str"),
    Knob("model.served_name", "served-model-name", "str"),
    Knob("model.revision", "revision", "str"),
    Knob("model.tokenizer", "tokenizer", "str"),
    Knob("model.quantization", "quantization", "str"),
    Knob("model.dtype", "dtype", "str"),
    Knob("model.trust_remote_code", "trust-remote-code", "bool"),
    Knob("engine.host", "host", "str"),
    Knob("engine.port", "port", "int"),
    Knob("engine.kv_cache_dtype", "kv-cache-dtype", "str", "categorical"),
    Knob("engine.block_size", "block-size", "int", "numeric"),
    Knob("engine.max_model_len", "max-model-len", "int", "numeric"),
    Knob("engine.max_num_seqs", "max-num-seqs", "int", "numeric"),
    Knob("engine.max_num_batched_tokens", "max-num-batched-tokens", "int", "numeric"),
    Knob("engine.enable_chunked_prefill", "enable-chunked-prefill", "bool", "categorical"),
    Knob("engine.long_prefill_token_threshold", "long-prefill-token-threshold", "int",
         "numeric"),
    # rendered as {"max_new_tokens": N}; extra_args may set other generation-config keys
    Knob("engine.max_output_tokens", "override-generation-config", "int", "numeric",
         exclusive=False),
    Knob("engine.gpu_memory_utilization", "gpu-memory-utilization", "float", "numeric",
         gpu_only=True),
    Knob("engine.enable_prefix_caching", "enable-prefix-caching", "bool", "categorical"),
    Knob("engine.tensor_parallel_size", "tensor-parallel-size", "int"),
    Knob("engine.enforce_eager", "enforce-eager", "bool", "categorical"),
)

BY_FIELD: dict[str, Knob] = {knob.field: knob for knob in KNOBS}


def knob_names(sweep: str) -> tuple[str, ...]:
    """Names of the engine knobs a search varies as ``sweep`` ("numeric"/"categorical")."""
    return tuple(k.name for k in KNOBS if k.sweep == sweep)
