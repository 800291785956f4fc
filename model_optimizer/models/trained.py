"""Build the tiny Llama *trained* on a synthetic, deterministic corpus: a model with something
to lose.

Random weights give near-uniform next-token distributions, so fidelity figures (top-1
agreement, KL divergence) mean little on them and no task has a real accuracy. This builder
trains the speed-test model's shape with 2 layers instead of 4 (:data:`TRAINED_SPEC`, about
1.5 M parameters) for a fixed number of steps in one thread (9 minutes measured on two busy
shared cores; docs/benchmarks/quality-gate.md) on four tiny grammars written in words:

- counting: ``count from three : three four five six seven .``
- copying: ``copy red cat blue : red cat blue .``
- addition: ``three plus four is seven .``
- subtraction: ``nine minus two is seven .``

Each line ends with the end-of-sequence token, so a served completion stops after its answer.
Measured: final loss 0.79 (the random parts of the lines, the copied words and the
operands, cannot be predicted), greedy accuracy 40/40 on
``examples/quality/tiny-tasks.jsonl`` and a mean top-1 probability of 0.988 along the
answers: confident, with something to lose. Everything is seeded (corpus, tokenizer,
initial weights, batch order), training runs in one thread with a fixed step count (never a
time budget), so two builds give the same weights. Nothing is downloaded.
The untrained model of :mod:`model_optimizer.models.tiny` stays the one for speed tests.
"""

from __future__ import annotations

import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

from model_optimizer.models.tiny import (
    MARKER_FILE,
    TinyModelSpec,
    build_lock,
    built_with,
    save_tokenizer,
)

NUMBERS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
           "ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
           "seventeen", "eighteen", "nineteen", "twenty"]
COPY_WORDS = ["red", "blue", "green", "cat", "dog", "bird", "fish", "sun", "moon", "tree",
              "rock", "cup", "box", "hat", "car", "bell"]
COUNT_LENGTH = 5


#: The trained model's shape: the speed-test model's layer (hidden size 256, 4 heads, 2 KV
#: heads, head size 64, as served by vLLM's CPU engine) with 2 layers instead of 4, so that
#: training stays short (about 1.5 M parameters).
TRAINED_SPEC = TinyModelSpec(num_hidden_layers=2)


@dataclass(frozen=True)
class TrainingSpec:
    """How the tiny model is trained (a fixed step count: the same weights on every machine)."""

    steps: int = 800
    batch_size: int = 32
    seq_len: int = 48
    learning_rate: float = 3e-3
    corpus_lines: int = 20000
    seed: int = 0


def count_line(start: int) -> str:
    """``count from <start> : <start> ... <start+4> .``"""
    run = " ".join(NUMBERS[start:start + COUNT_LENGTH])
    return f"count from {NUMBERS[start]} : {run} ."


def copy_line(words: list[str]) -> str:
    """``copy w1 w2 ... : w1 w2 ... .``"""
    return f"copy {' '.join(words)} : {' '.join(words)} ."


def plus_line(a: int, b: int) -> str:
    """``a plus b is a+b .`` (in words)"""
    return f"{NUMBERS[a]} plus {NUMBERS[b]} is {NUMBERS[a + b]} ."


def minus_line(a: int, b: int) -> str:
    """``a minus b is a-b .`` (in words)"""
    return f"{NUMBERS[a]} minus {NUMBERS[b]} is {NUMBERS[a - b]} ."


def corpus(seed: int, lines: int) -> list[str]:
    """The deterministic training corpus: the four grammars in equal shares."""
    rng = random.Random(seed)
    out = []
    for index in range(lines):
        kind = index % 4
        if kind == 0:
            out.append(count_line(rng.randint(0, len(NUMBERS) - COUNT_LENGTH)))
        elif kind == 1:
            out.append(copy_line([rng.choice(COPY_WORDS) for _ in range(rng.randint(2, 4))]))
        elif kind == 2:
            out.append(plus_line(rng.randint(0, 10), rng.randint(0, 10)))
        else:
            a = rng.randint(0, 20)
            out.append(minus_line(a, rng.randint(0, a)))
    rng.shuffle(out)
    return out


def task_items(seed: int = 7, per_kind: int = 10) -> list[dict]:
    """Eval-set items (see ``quality.evalset``) on the four grammars: the prompt stops where
    the answer starts; ``examples/quality/tiny-tasks.jsonl`` is ``task_items()``."""
    rng = random.Random(seed)
    items = []
    for index in range(per_kind):
        start = rng.randint(0, len(NUMBERS) - COUNT_LENGTH)
        items.append({"id": f"count-{index}", "prompt": f"count from {NUMBERS[start]} :",
                      "reference": count_line(start).split(" : ")[1].removesuffix(" ."),
                      "scorer": "exact"})
    for index in range(per_kind):
        words = [rng.choice(COPY_WORDS) for _ in range(rng.randint(2, 4))]
        items.append({"id": f"copy-{index}", "prompt": f"copy {' '.join(words)} :",
                      "reference": " ".join(words), "scorer": "exact"})
    for index in range(per_kind):
        a, b = rng.randint(0, 10), rng.randint(0, 10)
        items.append({"id": f"plus-{index}", "prompt": f"{NUMBERS[a]} plus {NUMBERS[b]} is",
                      "reference": NUMBERS[a + b], "scorer": "exact"})
    for index in range(per_kind):
        a = rng.randint(0, 20)
        b = rng.randint(0, a)
        items.append({"id": f"minus-{index}", "prompt": f"{NUMBERS[a]} minus {NUMBERS[b]} is",
                      "reference": NUMBERS[a - b], "scorer": "number"})
    return items


def beyond_items(seed: int = 11, per_kind: int = 10) -> list[dict]:
    """Eval-set items of a class the model was never taught, ``plus-beyond``: additions whose
    first operand is 11-19 (the corpus's ``plus`` lines keep both operands at 10 or less), the
    sum at most twenty. The model answers them with thin margins between its top two tokens
    (measured: a median logit gap of 1.4 against 3.7 for ``plus``), the case where a coarser
    weight changes the answer. Not part of ``tiny-tasks.jsonl``."""
    rng = random.Random(seed)
    items = []
    for index in range(per_kind):
        a = rng.randint(11, 19)
        b = rng.randint(1, 20 - a)
        items.append({"id": f"plus-beyond-{index}",
                      "prompt": f"{NUMBERS[a]} plus {NUMBERS[b]} is",
                      "reference": NUMBERS[a + b], "scorer": "exact"})
    return items


def _token_stream(tokenizer, lines: list[str], eos_id: int) -> list[list[int]]:
    """Each line's token ids followed by the end-of-sequence token."""
    return [tokenizer.encode(line, add_special_tokens=False) + [eos_id] for line in lines]


def _batches(encoded: list[list[int]], spec: TrainingSpec, pad_id: int):
    """Deterministic batches of line-aligned, packed windows of ``seq_len`` tokens."""
    import torch

    rng = random.Random(spec.seed + 1)
    for _ in range(spec.steps):
        rows = []
        for _ in range(spec.batch_size):
            start = rng.randrange(len(encoded))
            row: list[int] = []
            index = start
            while len(row) < spec.seq_len:
                row.extend(encoded[index % len(encoded)])
                index += 1
            rows.append(row[:spec.seq_len])
        batch = torch.tensor(rows, dtype=torch.long)
        yield batch, torch.where(batch == pad_id, -100, batch)


def train(model, tokenizer, spec: TrainingSpec, on_step=None) -> float:
    """Train ``model`` in place for ``spec.steps`` steps; return the last loss."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # same arithmetic on every machine; no spinning on busy cores
    try:
        return _train(model, tokenizer, spec, on_step)
    finally:
        torch.set_num_threads(threads)


def _train(model, tokenizer, spec: TrainingSpec, on_step) -> float:
    import torch

    encoded = _token_stream(tokenizer, corpus(spec.seed, spec.corpus_lines),
                            tokenizer.eos_token_id)
    optimizer = torch.optim.AdamW(model.parameters(), lr=spec.learning_rate,
                                  weight_decay=0.01)
    warmup = max(1, spec.steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup)
        * max(0.05, 1 - step / spec.steps))
    model.train()
    loss_value = float("nan")
    for step, (inputs, labels) in enumerate(_batches(encoded, spec, tokenizer.pad_token_id)):
        loss = model(input_ids=inputs, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        loss_value = float(loss.detach())
        if on_step is not None:
            on_step(step + 1, spec.steps, loss_value)
    model.eval()
    return loss_value


def build_trained_model(out_dir: str | Path, spec: TinyModelSpec | None = None,
                        training: TrainingSpec | None = None, force: bool = False,
                        on_step=None) -> Path:
    """Write the trained tiny Llama checkpoint to ``out_dir`` and return its path.

    Idempotent: a folder built with the same specs is left alone unless ``force``.
    ``on_step(step, steps, loss)`` reports progress.
    """
    spec = spec or TRAINED_SPEC
    training = training or TrainingSpec()
    out = Path(out_dir)
    marker = {**asdict(spec), "training": asdict(training)}
    if not force and built_with(out, marker):
        return out
    with build_lock(out):  # a second builder waits, then finds this one's model
        if force or not built_with(out, marker):
            _train_and_write(out, spec, training, marker, on_step)
    return out


def _train_and_write(out: Path, spec: TinyModelSpec, training: TrainingSpec, marker: dict,
                     on_step) -> None:
    marker_path = out / MARKER_FILE
    out.mkdir(parents=True, exist_ok=True)

    import torch
    from transformers import LlamaForCausalLM

    from model_optimizer.models.tiny import llama_config

    tokenizer = save_tokenizer(out, spec.vocab_size, corpus(spec.seed, 4000))
    torch.manual_seed(training.seed)
    model = LlamaForCausalLM(llama_config(spec)).to(torch.float32)
    loss = train(model, tokenizer, training, on_step)
    model.to(getattr(torch, spec.dtype)).save_pretrained(str(out), safe_serialization=True)
    marker_path.write_text(json.dumps(marker, indent=2) + "\n")
    (out / "mopt-training.json").write_text(json.dumps({"final_loss": loss}, indent=2) + "\n")
