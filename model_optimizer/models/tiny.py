"""Build a tiny Llama-architecture model with random weights and a locally trained tokenizer.

It gives mopt a real model to serve on machines without a GPU and without a model hub: vLLM's
CPU build loads it like any Hugging Face checkpoint. Nothing is downloaded. The weights are
random, so the text it generates is noise; the serving mechanics (tokenization, KV cache,
continuous batching, streaming) are real. :mod:`model_optimizer.models.trained` builds the
same architecture trained on a synthetic corpus, for quality figures that mean something.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

MARKER_FILE = "mopt-tiny-model.json"


@dataclass(frozen=True)
class TinyModelSpec:
    """Shape of the tiny model (defaults: about 5 MB in bf16)."""

    hidden_size: int = 256
    intermediate_size: int = 512
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    vocab_size: int = 512
    max_position_embeddings: int = 2048
    dtype: str = "bfloat16"
    seed: int = 0


#: the engine-paced bed's model (recipes/bed-cpu.yaml): ~89 M parameters, so that one decode
#: step of a batch costs the engine's core tens of milliseconds while streaming its tokens
#: costs the API server's and the client's core little (docs/benchmarks/agreement.md)
BED_SPEC = TinyModelSpec(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                         num_attention_heads=16, num_key_value_heads=4)


_WORDS = [
    "the", "model", "serves", "tokens", "to", "many", "users", "while", "the", "scheduler",
    "batches", "requests", "and", "the", "cache", "holds", "keys", "and", "values", "for",
    "every", "sequence", "in", "flight", "latency", "throughput", "memory", "bandwidth",
    "prefill", "decode", "block", "page", "quantization", "weights", "activations", "prompt",
    "output", "stream", "queue", "engine", "server", "client", "request", "response",
    "metric", "percentile", "sweep", "recipe", "archive", "rollback",
]


def _training_corpus(seed: int, lines: int = 4000) -> list[str]:
    """Deterministic pseudo-English text to train the BPE tokenizer on."""
    rng = random.Random(seed)
    corpus = []
    for _ in range(lines):
        words = [rng.choice(_WORDS) for _ in range(rng.randint(5, 20))]
        number = str(rng.randint(0, 99999))
        corpus.append(" ".join(words) + f" {number}.")
    return corpus


def build_tokenizer(out_dir: Path, vocab_size: int, seed: int = 0) -> None:
    """Train a byte-level BPE tokenizer locally and save it in Hugging Face format."""
    save_tokenizer(out_dir, vocab_size, _training_corpus(seed))


def save_tokenizer(out_dir: Path, vocab_size: int, lines: list[str]):
    """Train a byte-level BPE tokenizer on ``lines``, save it in Hugging Face format and
    return it (a ``PreTrainedTokenizerFast``)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(lines, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
    )
    # A minimal chat template so /v1/chat/completions works too.
    fast.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    fast.save_pretrained(str(out_dir))
    return fast


def llama_config(spec: TinyModelSpec):
    """The transformers ``LlamaConfig`` of ``spec`` (special token ids 0, 1, 2)."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=spec.vocab_size,
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        bos_token_id=0,
        eos_token_id=1,
        pad_token_id=2,
        tie_word_embeddings=False,
    )


@contextlib.contextmanager
def build_lock(out: Path) -> Iterator[None]:
    """Hold the lock of building ``out`` (a sibling ``.<name>.lock`` file): two processes that
    build the same model (two test workers, two `mopt tiny-model` calls) take turns, and the
    second finds the first's finished folder instead of writing over it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "a") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def built_with(out: Path, marker: dict) -> bool:
    """True when ``out`` holds a finished build whose marker file equals ``marker``."""
    try:
        return json.loads((out / MARKER_FILE).read_text()) == marker
    except (OSError, ValueError):
        return False


def build_tiny_model(out_dir: str | Path, spec: TinyModelSpec | None = None,
                     force: bool = False) -> Path:
    """Write a servable tiny Llama checkpoint to ``out_dir`` and return its path.

    Idempotent: an existing folder built with the same spec is left alone unless ``force``.
    """
    spec = spec or TinyModelSpec()
    out = Path(out_dir)
    if not force and built_with(out, asdict(spec)):
        return out
    with build_lock(out):
        if force or not built_with(out, asdict(spec)):
            _write_tiny_model(out, spec)
    return out


def _write_tiny_model(out: Path, spec: TinyModelSpec) -> None:
    marker = out / MARKER_FILE
    out.mkdir(parents=True, exist_ok=True)

    import torch
    from transformers import LlamaForCausalLM

    build_tokenizer(out, spec.vocab_size, spec.seed)
    torch.manual_seed(spec.seed)
    config = llama_config(spec)
    dtype = getattr(torch, spec.dtype)
    model = LlamaForCausalLM(config).to(dtype)
    model.save_pretrained(str(out), safe_serialization=True)
    marker.write_text(json.dumps(asdict(spec), indent=2) + "\n")
